#include "Microkernel.h"

#include "mlir/Dialect/AMX/AMXDialect.h"

#include "mlir/Dialect/X86Vector/X86VectorDialect.h"

using namespace mlir;

namespace qkv::ir {

Value broadcastPair(KernelBuilder &kb, Value pair, int64_t lanes) {
  ImplicitLocOpBuilder &b = kb.builder();
  Value word = vector::BitCastOp::create(b, VectorType::get({1}, b.getI32Type()), pair);
  Value one = vector::ExtractOp::create(b, word, ArrayRef<int64_t>{0});
  Value words = vector::BroadcastOp::create(b, VectorType::get({lanes}, b.getI32Type()), one);
  return vector::BitCastOp::create(b, VectorType::get({2 * lanes}, b.getBF16Type()), words);
}

namespace {

/// One step of K: C's tile `acc` plus A's rows (from `aOf`) times B's row k.
SmallVector<Value> gemmStep(KernelBuilder &in, const GemmSpec &s, ArrayRef<Value> rowIdx,
                            Value k, ValueRange acc,
                            const std::function<Value(KernelBuilder &, Value)> &aOf) {
  VectorType vt = in.vec(s.elem, s.lanes);
  SmallVector<Value> bv;
  for (int64_t c = 0; c < s.nc; ++c)
    bv.push_back(s.b(in, k, c));
  SmallVector<Value> out(acc.begin(), acc.end());
  for (size_t r = 0; r < rowIdx.size(); ++r) {
    Value a = aOf(in, rowIdx[r]);
    Value av = s.dot ? broadcastPair(in, a, s.lanes) : in.splat(a, vt);
    for (int64_t c = 0; c < s.nc; ++c) {
      Value &o = out[r * s.nc + c];
      o = s.dot ? x86vector::DotBF16Op::create(in.builder(), vt, o, av, bv[c]).getResult()
                : vector::FMAOp::create(in.builder(), av, bv[c], o).getResult();
    }
  }
  return out;
}

} // namespace

void emitGemmTile(KernelBuilder &kb, const GemmSpec &s, Value i0, int64_t rows) {
  SmallVector<Value> rowIdx;
  for (int64_t r = 0; r < rows; ++r)
    rowIdx.push_back(kb.add(i0, r));
  SmallVector<Value> acc;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < s.nc; ++c)
      acc.push_back(s.init(kb, rowIdx[r], c));
  SmallVector<Value> res =
      kb.forLoop(kb.idx(0), s.K, kb.idx(1), acc, [&](KernelBuilder &in, Value k, ValueRange args) {
        if (s.prefetch)
          s.prefetch(in, i0, k);
        return gemmStep(in, s, rowIdx, k, args,
                        [&](KernelBuilder &b, Value i) { return s.a(b, i, k); });
      });
  if (s.tail) {
    ImplicitLocOpBuilder &b = kb.builder();
    auto ifOp = scf::IfOp::create(b, ValueRange(res).getTypes(), s.tail, /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      KernelBuilder in(b);
      scf::YieldOp::create(b, gemmStep(in, s, rowIdx, s.K, res, s.aTail));
      b.setInsertionPointToStart(ifOp.elseBlock());
      scf::YieldOp::create(b, res);
    }
    res.assign(ifOp.getResults().begin(), ifOp.getResults().end());
  }
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

SmallVector<Value> emitAmxBlock(KernelBuilder &kb, Value steps, ValueRange acc,
                                const AmxLoadA &loadA, const AmxLoadB &loadB) {
  auto accType = amx::TileType::get({kAmxTileRows, kAmxTileRows}, kb.builder().getF32Type());
  return kb.forLoop(kb.idx(0), steps, kb.idx(1), acc,
                    [&](KernelBuilder &in, Value k, ValueRange c) {
                      Value at[2] = {loadA(in, 0, k), loadA(in, 1, k)};
                      Value bt[2] = {loadB(in, k, 0), loadB(in, k, 1)};
                      SmallVector<Value> next;
                      for (int r = 0; r < 2; ++r)
                        for (int col = 0; col < 2; ++col)
                          next.push_back(amx::TileMulFOp::create(in.builder(), accType, at[r],
                                                                 bt[col], c[2 * r + col]));
                      return next;
                    });
}

} // namespace qkv::ir
