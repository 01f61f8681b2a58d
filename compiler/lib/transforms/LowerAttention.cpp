// qkv-lower-attention-to-loops: qkv.attention -> scf loops over (b, h, q) with an online
// softmax over kv (FlashAttention's recurrence with a KV tile of 1):
//
//   m = -inf, l = 0, acc[:] = 0
//   for kv: s = mod(scale * q.k); if kept: m' = max(m, s), c = exp(m - m'),
//           p = exp(s - m'), l = l c + p, acc = acc c + p v[kv], m = m'
//   out = l > 0 ? acc / l : 0            (a fully masked row gives 0)
//
// The loops read q/k/v through bufferization.to_buffer and write a fresh buffer that
// becomes the result tensor (bufferization.to_tensor restrict), so no L x S tensor and no
// mask tensor is ever made; mod regions are inlined in the innermost loop.
#include "LoweringUtils.h"

#include <limits>

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "qkv/compiler/transforms/Passes.h"

namespace qkv::ir {
#define GEN_PASS_DEF_LOWERATTENTIONTOLOOPS
#include "qkv/compiler/transforms/Passes.h.inc"
} // namespace qkv::ir

using namespace mlir;
using namespace qkv::ir;

namespace {

Value readBuffer(OpBuilder &b, Location loc, Value t) {
  auto tt = tensorType(t);
  auto mt = MemRefType::get(
      tt.getShape(), tt.getElementType(),
      StridedLayoutAttr::get(b.getContext(), ShapedType::kDynamic,
                             SmallVector<int64_t>(tt.getRank(), ShapedType::kDynamic)));
  return bufferization::ToBufferOp::create(b, loc, mt, t, /*read_only=*/true);
}

struct AttentionLowering : OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(AttentionOp op, PatternRewriter &rw) const override {
    Location loc = op.getLoc();
    Value q = op.getQ(), k = op.getK(), v = op.getV();
    auto qt = tensorType(q);
    int64_t r = qt.getRank();
    Type ft = qt.getElementType();
    auto outT = tensorType(op.getResult());

    Value zero = indexConst(rw, loc, 0), one = indexConst(rw, loc, 1);
    Value nB = r == 4 ? sizeValue(rw, loc, q, 0) : one;
    Value nH = r >= 3 ? sizeValue(rw, loc, q, r - 3) : one;
    Value nHk = r >= 3 ? sizeValue(rw, loc, k, r - 3) : one;
    Value nL = sizeValue(rw, loc, q, r - 2), nS = sizeValue(rw, loc, k, r - 2);
    Value nDh = sizeValue(rw, loc, q, r - 1), nDv = sizeValue(rw, loc, v, r - 1);
    Value group = arith::DivUIOp::create(rw, loc, nH, nHk);

    Value scale;
    if (auto s = op.getScale())
      scale = floatConst(rw, loc, ft, s->convertToDouble());
    else
      scale = arith::DivFOp::create(rw, loc, floatConst(rw, loc, ft, 1.0),
                                    math::SqrtOp::create(rw, loc, indexToFloat(rw, loc, nDh, ft)));

    Value qm = readBuffer(rw, loc, q), km = readBuffer(rw, loc, k), vm = readBuffer(rw, loc, v);
    SmallVector<Value> dynOut;
    for (int64_t i = 0; i < r; ++i)
      if (outT.isDynamicDim(i))
        dynOut.push_back(i == r - 1 ? nDv : sizeValue(rw, loc, q, i));
    auto outM = memref::AllocOp::create(rw, loc, MemRefType::get(outT.getShape(), ft), dynOut);
    int64_t dv = outT.getDimSize(r - 1);
    auto accT = MemRefType::get({dv}, ft);
    Value acc = memref::AllocOp::create(rw, loc, accT,
                                        ShapedType::isDynamic(dv) ? ValueRange{nDv} : ValueRange{});

    // Index lists for rank 2/3/4 tensors: (b, h, row, col) minus the absent leading dims.
    auto at = [r](Value bi, Value hi, Value row, Value col) {
      SmallVector<Value> idx;
      if (r == 4)
        idx.push_back(bi);
      if (r >= 3)
        idx.push_back(hi);
      idx.append({row, col});
      return idx;
    };
    double ninf = -std::numeric_limits<double>::infinity();
    ValueRange caps = op.getCaptures();
    bool hasScore = !op.getScore().empty(), hasMask = !op.getMask().empty();

    auto loopB = scf::ForOp::create(rw, loc, zero, nB, one);
    rw.setInsertionPointToStart(loopB.getBody());
    Value bi = loopB.getInductionVar();
    auto loopH = scf::ForOp::create(rw, loc, zero, nH, one);
    rw.setInsertionPointToStart(loopH.getBody());
    Value hi = loopH.getInductionVar();
    Value hk = arith::DivUIOp::create(rw, loc, hi, group);
    auto loopI = scf::ForOp::create(rw, loc, zero, nL, one);
    rw.setInsertionPointToStart(loopI.getBody());
    Value qi = loopI.getInductionVar();

    // acc[:] = 0
    {
      auto fill = scf::ForOp::create(rw, loc, zero, nDv, one);
      OpBuilder::InsertionGuard g(rw);
      rw.setInsertionPointToStart(fill.getBody());
      memref::StoreOp::create(rw, loc, floatConst(rw, loc, ft, 0.0), acc,
                              ValueRange{fill.getInductionVar()});
    }

    Value m0 = floatConst(rw, loc, ft, ninf), l0 = floatConst(rw, loc, ft, 0.0);
    auto loopJ = scf::ForOp::create(rw, loc, zero, nS, one, ValueRange{m0, l0});
    {
      OpBuilder::InsertionGuard g(rw);
      rw.setInsertionPointToStart(loopJ.getBody());
      Value kj = loopJ.getInductionVar();
      Value m = loopJ.getRegionIterArgs()[0], l = loopJ.getRegionIterArgs()[1];
      // s = scale * sum_d q[b,h,i,d] k[b,hk,j,d]
      auto dot = scf::ForOp::create(rw, loc, zero, nDh, one, ValueRange{l0});
      {
        OpBuilder::InsertionGuard g2(rw);
        rw.setInsertionPointToStart(dot.getBody());
        Value d = dot.getInductionVar();
        Value a = memref::LoadOp::create(rw, loc, qm, at(bi, hi, qi, d));
        Value c = memref::LoadOp::create(rw, loc, km, at(bi, hk, kj, d));
        Value sum = arith::AddFOp::create(rw, loc, dot.getRegionIterArgs()[0],
                                          arith::MulFOp::create(rw, loc, a, c));
        scf::YieldOp::create(rw, loc, sum);
      }
      Value s = arith::MulFOp::create(rw, loc, dot.getResult(0), scale);
      SmallVector<Value> pos{bi, hi, qi, kj, nL, nS};
      if (hasScore) {
        SmallVector<Value> lead{s};
        lead.append(pos);
        s = inlineModRegion(rw, op.getScore(), lead, caps);
      }
      // A score of -inf (or NaN) contributes nothing, exactly like a masked one.
      Value keep = arith::CmpFOp::create(rw, loc, arith::CmpFPredicate::OGT, s,
                                         floatConst(rw, loc, ft, ninf));
      if (hasMask)
        keep = arith::AndIOp::create(rw, loc, keep, inlineModRegion(rw, op.getMask(), pos, caps));
      auto ifOp = scf::IfOp::create(rw, loc, TypeRange{ft, ft}, keep, /*withElse=*/true);
      {
        OpBuilder::InsertionGuard g2(rw);
        rw.setInsertionPointToStart(&ifOp.getThenRegion().front());
        Value mNew = arith::MaximumFOp::create(rw, loc, m, s);
        Value corr = math::ExpOp::create(rw, loc, arith::SubFOp::create(rw, loc, m, mNew));
        Value p = math::ExpOp::create(rw, loc, arith::SubFOp::create(rw, loc, s, mNew));
        Value lNew = arith::AddFOp::create(rw, loc, arith::MulFOp::create(rw, loc, l, corr), p);
        auto upd = scf::ForOp::create(rw, loc, zero, nDv, one);
        {
          OpBuilder::InsertionGuard g3(rw);
          rw.setInsertionPointToStart(upd.getBody());
          Value d = upd.getInductionVar();
          Value av = memref::LoadOp::create(rw, loc, acc, ValueRange{d});
          Value vv = memref::LoadOp::create(rw, loc, vm, at(bi, hk, kj, d));
          Value nv = arith::AddFOp::create(rw, loc, arith::MulFOp::create(rw, loc, av, corr),
                                           arith::MulFOp::create(rw, loc, p, vv));
          memref::StoreOp::create(rw, loc, nv, acc, ValueRange{d});
        }
        scf::YieldOp::create(rw, loc, ValueRange{mNew, lNew});
        rw.setInsertionPointToStart(&ifOp.getElseRegion().front());
        scf::YieldOp::create(rw, loc, ValueRange{m, l});
      }
      scf::YieldOp::create(rw, loc, ifOp.getResults());
    }
    // out[b,h,i,:] = l > 0 ? acc / l : 0
    Value lFinal = loopJ.getResult(1);
    Value any = arith::CmpFOp::create(rw, loc, arith::CmpFPredicate::OGT, lFinal, l0);
    auto wr = scf::ForOp::create(rw, loc, zero, nDv, one);
    {
      OpBuilder::InsertionGuard g(rw);
      rw.setInsertionPointToStart(wr.getBody());
      Value d = wr.getInductionVar();
      Value av = memref::LoadOp::create(rw, loc, acc, ValueRange{d});
      Value o =
          arith::SelectOp::create(rw, loc, any, arith::DivFOp::create(rw, loc, av, lFinal), l0);
      memref::StoreOp::create(rw, loc, o, outM, at(bi, hi, qi, d));
    }

    // No dealloc of acc here: the ownership-based deallocation pass that runs after
    // bufferization places it (and rejects IR that frees memory itself).
    rw.setInsertionPointAfter(loopB);
    Value res =
        bufferization::ToTensorOp::create(rw, loc, outT, outM, /*restrict=*/rw.getUnitAttr(),
                                          /*writable=*/rw.getUnitAttr());
    rw.replaceOp(op, res);
    return success();
  }
};

struct LowerAttentionToLoopsPass
    : qkv::ir::impl::LowerAttentionToLoopsBase<LowerAttentionToLoopsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<AttentionLowering>(&getContext());
    GreedyRewriteConfig config;
    config.setStrictness(GreedyRewriteStrictness::ExistingOps);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns), config)))
      signalPassFailure();
  }
};

} // namespace
