#include "Microkernel.h"

using namespace mlir;

namespace qkv::ir {

void emitGemmTile(KernelBuilder &kb, const GemmSpec &s, Value i0, int64_t rows) {
  VectorType vt = kb.vec(s.elem, s.lanes);
  SmallVector<Value> rowIdx;
  for (int64_t r = 0; r < rows; ++r)
    rowIdx.push_back(kb.add(i0, r));
  SmallVector<Value> acc;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < s.nc; ++c)
      acc.push_back(s.init(kb, rowIdx[r], c));
  SmallVector<Value> res =
      kb.forLoop(kb.idx(0), s.K, kb.idx(1), acc, [&](KernelBuilder &in, Value k, ValueRange args) {
        SmallVector<Value> bv;
        for (int64_t c = 0; c < s.nc; ++c)
          bv.push_back(s.b(in, k, c));
        SmallVector<Value> out(args.begin(), args.end());
        for (int64_t r = 0; r < rows; ++r) {
          Value av = in.splat(s.a(in, rowIdx[r], k), vt);
          for (int64_t c = 0; c < s.nc; ++c)
            out[r * s.nc + c] = vector::FMAOp::create(in.builder(), av, bv[c], args[r * s.nc + c]);
        }
        return out;
      });
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < s.nc; ++c)
      s.store(kb, rowIdx[r], c, res[r * s.nc + c]);
}

void emitGemm(KernelBuilder &kb, const GemmSpec &s) {
  Value mr = kb.idx(s.mr);
  if (s.staticM) {
    int64_t full = *s.staticM / s.mr * s.mr, rem = *s.staticM % s.mr;
    if (full > 0)
      kb.forLoop(kb.idx(0), kb.idx(full), mr,
                 [&](KernelBuilder &in, Value i0) { emitGemmTile(in, s, i0, s.mr); });
    if (rem > 0)
      emitGemmTile(kb, s, kb.idx(full), rem);
    return;
  }
  Value full = kb.mul(kb.divu(s.M, mr), mr);
  kb.forLoop(kb.idx(0), full, mr, [&](KernelBuilder &in, Value i0) { emitGemmTile(in, s, i0, s.mr); });
  kb.forLoop(full, s.M, kb.idx(1), [&](KernelBuilder &in, Value i) { emitGemmTile(in, s, i, 1); });
}

int64_t gemmRowsFor(int64_t nc, int64_t vectorRegisters) {
  // C tile + nc B vectors + 1 broadcast must fit; leave one register spare.
  int64_t rows = (vectorRegisters - nc - 2) / nc;
  return std::max<int64_t>(1, std::min<int64_t>(rows, 8));
}

} // namespace qkv::ir
