// qkv-lower-matmul-to-microkernels: linalg.matmul and linalg.batch_matmul on buffers
// (after bufferization) -> the register-tiled vector micro-kernel, in parallel tasks.
//
// C (M x N) is cut into panels of nc vectors of columns and blocks of rows; each task
// (batch, panel, row block) runs the micro-kernel over the whole K, so the panel of B it
// reads (K x nc vectors) stays in cache across the block's register tiles, and A's rows
// are read as broadcasts. Columns past the last whole panel are done one masked vector
// at a time. B and C need unit stride along their last dim (they always have it in the
// CPU pipeline: operands are fresh buffers or identity-layout arguments); a matmul that
// does not is left to convert-linalg-to-parallel-loops.
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "Microkernel.h"
#include "qkv/compiler/transforms/Passes.h"

namespace qkv::ir {
#define GEN_PASS_DEF_LOWERMATMULTOMICROKERNELS
#include "qkv/compiler/transforms/Passes.h.inc"
} // namespace qkv::ir

using namespace mlir;
using namespace qkv::ir;

namespace {

bool unitInnerStride(Value v) {
  auto mt = dyn_cast<MemRefType>(v.getType());
  if (!mt)
    return false;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(mt.getStridesAndOffset(strides, offset)))
    return false;
  return !strides.empty() && strides.back() == 1;
}

struct MatmulOperands {
  Value a, b, c;
  bool batched;
  bool sharedB; // batch_matmul whose B (K x N) serves every batch
  Type elem;
  SmallVector<Value> at(Value batch, Value row, Value col, bool isB = false) const {
    SmallVector<Value> idx;
    if (batched && !(isB && sharedB))
      idx.push_back(batch);
    idx.append({row, col});
    return idx;
  }
};

/// batch_matmul's indexing maps: the default ones, or B (k, n) shared by all batches.
std::optional<bool> sharedBMaps(linalg::BatchMatmulOp op) {
  if (!op.hasUserDefinedMaps())
    return false;
  MLIRContext *ctx = op.getContext();
  auto map = [&](ArrayRef<unsigned> dims) {
    SmallVector<AffineExpr> e;
    for (unsigned d : dims)
      e.push_back(getAffineDimExpr(d, ctx));
    return AffineMap::get(4, 0, e, ctx);
  };
  SmallVector<AffineMap> want = {map({0, 1, 3}), map({3, 2}), map({0, 1, 2})};
  if (op.getIndexingMapsArray() == ArrayRef<AffineMap>(want))
    return true;
  return std::nullopt;
}

/// Keys of the K loop per block: a block of the B panel (kBlock x nc vectors) stays in
/// the L1 cache while every register tile of the row block passes over it.
constexpr int64_t kBlock = 128;

/// C[batch][rows [i0, i0 + m)][cols [n0, n0 + nc * lanes)] += A . B, in place, K in
/// blocks of kBlock.
void emitPanel(KernelBuilder &kb, const MatmulOperands &o, Value batch, Value i0, Value m, Value n0,
               Value k, int64_t lanes, int64_t nc, int64_t regs, Value mask) {
  VectorType vt = kb.vec(o.elem, lanes);
  auto load = [&](KernelBuilder &in, Value mem, SmallVector<Value> idx) -> Value {
    if (!mask)
      return in.vload(vt, mem, idx);
    return vector::MaskedLoadOp::create(in.builder(), vt, mem, idx, mask, in.fconst(vt, 0.0));
  };
  kb.forLoop(kb.idx(0), k, kBlock, [&](KernelBuilder &blk, Value k0) {
    GemmSpec g;
    g.elem = o.elem;
    g.lanes = lanes;
    g.nc = nc;
    g.mr = gemmRowsFor(nc, regs);
    g.M = m;
    g.K = blk.min(blk.idx(kBlock), blk.sub(k, k0));
    g.a = [&](KernelBuilder &in, Value i, Value kk) {
      return in.load(o.a, o.at(batch, in.add(i0, i), in.add(k0, kk)));
    };
    g.b = [&](KernelBuilder &in, Value kk, int64_t c) {
      return load(in, o.b, o.at(batch, in.add(k0, kk), in.add(n0, c * lanes), /*isB=*/true));
    };
    g.init = [&](KernelBuilder &in, Value i, int64_t c) {
      return load(in, o.c, o.at(batch, in.add(i0, i), in.add(n0, c * lanes)));
    };
    g.store = [&](KernelBuilder &in, Value i, int64_t c, Value v) {
      SmallVector<Value> idx = o.at(batch, in.add(i0, i), in.add(n0, c * lanes));
      if (!mask)
        return in.vstore(v, o.c, idx);
      vector::MaskedStoreOp::create(in.builder(), o.c, idx, mask, v);
    };
    emitGemm(blk, g);
  });
}

struct MatmulToMicrokernel : RewritePattern {
  MatmulToMicrokernel(MLIRContext *ctx, int64_t vectorBits)
      : RewritePattern(MatchAnyOpTypeTag(), 1, ctx), vectorBits(vectorBits) {}

  LogicalResult matchAndRewrite(Operation *op, PatternRewriter &rw) const override {
    auto mm = dyn_cast<linalg::MatmulOp>(op);
    auto bmm = dyn_cast<linalg::BatchMatmulOp>(op);
    if (!mm && !bmm)
      return failure();
    auto lop = cast<linalg::LinalgOp>(op);
    std::optional<bool> shared = bmm ? sharedBMaps(bmm) : std::optional<bool>(false);
    if (!lop.hasPureBufferSemantics() || (mm && mm.hasUserDefinedMaps()) || !shared)
      return rw.notifyMatchFailure(op, "not a plain matmul on buffers");
    MatmulOperands o{lop.getDpsInputs()[0],
                     lop.getDpsInputs()[1],
                     lop.getDpsInits()[0],
                     bmm != nullptr,
                     *shared,
                     getElementTypeOrSelf(lop.getDpsInits()[0].getType())};
    if ((!o.elem.isF32() && !o.elem.isF64()) || !unitInnerStride(o.b) || !unitInnerStride(o.c))
      return rw.notifyMatchFailure(op, "needs f32/f64 and unit-stride rows of B and C");
    ImplicitLocOpBuilder ib(op->getLoc(), rw);
    KernelBuilder kb(ib);
    emitTiled(kb, o);
    rw.eraseOp(op);
    return success();
  }

  void emitTiled(KernelBuilder &kb, const MatmulOperands &o) const {
    ImplicitLocOpBuilder &ib = kb.builder();
    int64_t r = o.batched ? 1 : 0;
    Value nBatch = o.batched ? Value(memref::DimOp::create(ib, o.c, 0)) : kb.idx(1);
    Value m = memref::DimOp::create(ib, o.c, r), n = memref::DimOp::create(ib, o.c, r + 1);
    Value k = memref::DimOp::create(ib, o.a, r + 1);
    int64_t lanes = std::max<int64_t>(1, vectorBits / o.elem.getIntOrFloatBitWidth());
    int64_t regs = vectorBits >= 512 ? 32 : 16;
    int64_t nc = 4, panel = nc * lanes;
    int64_t rowBlock = 8 * gemmRowsFor(nc, regs);
    Value panels = kb.divu(n, kb.idx(panel));
    Value blocks = kb.ceilDiv(m, rowBlock);
    kb.parallel({nBatch, panels, blocks}, [&](KernelBuilder &in, ValueRange iv) {
      Value i0 = in.mul(iv[2], rowBlock);
      Value rows = in.min(in.idx(rowBlock), in.sub(m, i0));
      emitPanel(in, o, iv[0], i0, rows, in.mul(iv[1], panel), k, lanes, nc, regs, Value());
    });
    // Columns past the whole panels: one vector at a time, the last one masked.
    Value nDone = kb.mul(panels, panel);
    Value vecs = kb.ceilDiv(kb.sub(n, nDone), lanes);
    kb.parallel({nBatch, vecs, blocks}, [&](KernelBuilder &in, ValueRange iv) {
      Value i0 = in.mul(iv[2], rowBlock);
      Value rows = in.min(in.idx(rowBlock), in.sub(m, i0));
      Value n0 = in.add(nDone, in.mul(iv[1], lanes));
      auto mt = VectorType::get({lanes}, in.builder().getI1Type());
      Value mask = vector::CreateMaskOp::create(in.builder(), mt, ValueRange{in.sub(n, n0)});
      emitPanel(in, o, iv[0], i0, rows, n0, k, lanes, 1, regs, mask);
    });
  }

  int64_t vectorBits;
};

struct LowerMatmulToMicrokernelsPass
    : qkv::ir::impl::LowerMatmulToMicrokernelsBase<LowerMatmulToMicrokernelsPass> {
  using LowerMatmulToMicrokernelsBase::LowerMatmulToMicrokernelsBase;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<MatmulToMicrokernel>(&getContext(), vectorBits);
    GreedyRewriteConfig config;
    config.setStrictness(GreedyRewriteStrictness::ExistingOps);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns), config)))
      signalPassFailure();
  }
};

} // namespace
