// The merge of partial attentions (merge_attention, merge_lse) as linalg.generic, computing
// what the interpreter computes: each partial weighted by e^(lse - max) per row.
#include "QkvToLinalg.h"

#include <limits>

#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using namespace qkv::ir;

namespace {

/// The two partials' weights e^(la - m), e^(lb - m), m = max(la, lb) (0 when both are
/// -inf, so both weights are 0; NaN when either is NaN), and that m.
struct Weights {
  Value wa, wb, m;
};

Weights weights(OpBuilder &b, Location l, Value la, Value lb) {
  Type t = la.getType();
  Value m = arith::MaximumFOp::create(b, l, la, lb);
  Value none = arith::CmpFOp::create(b, l, arith::CmpFPredicate::OEQ, m,
                                     floatConst(b, l, t, -std::numeric_limits<double>::infinity()));
  m = arith::SelectOp::create(b, l, none, floatConst(b, l, t, 0.0), m);
  return {math::ExpOp::create(b, l, arith::SubFOp::create(b, l, la, m)),
          math::ExpOp::create(b, l, arith::SubFOp::create(b, l, lb, m)), m};
}

/// out = (wa oa + wb ob) / (wa + wb), 0 where both weights are 0.
struct MergeAttentionLowering : OpRewritePattern<MergeAttentionOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MergeAttentionOp op, PatternRewriter &rw) const override {
    Location loc = op.getLoc();
    unsigned r = tensorType(op.getOa()).getRank();
    MLIRContext *ctx = rw.getContext();
    AffineMap all = dimsMap(ctx, r, range(0, r)), rows = dimsMap(ctx, r, range(0, r - 1));
    Type elem = tensorType(op.getResult()).getElementType();
    Value init = emptyOf(rw, loc, sizesOf(rw, loc, op.getOa()), elem);
    Value res =
        generic(rw, loc, init, ValueRange{op.getOa(), op.getLa(), op.getOb(), op.getLb()},
                {all, rows, all, rows}, all, iterators(r),
                [](OpBuilder &b, Location l, ValueRange x) -> Value {
                  Weights w = weights(b, l, x[1], x[3]);
                  Value total = arith::AddFOp::create(b, l, w.wa, w.wb);
                  Value num = math::FmaOp::create(b, l, w.wa, x[0],
                                                  arith::MulFOp::create(b, l, w.wb, x[2]));
                  // total > 0, or NaN, which the division carries to the output.
                  Value any = arith::CmpFOp::create(b, l, arith::CmpFPredicate::UGT, total,
                                                    floatConst(b, l, total.getType(), 0.0));
                  return arith::SelectOp::create(b, l, any, arith::DivFOp::create(b, l, num, total),
                                                 floatConst(b, l, total.getType(), 0.0));
                });
    rw.replaceOp(op, res);
    return success();
  }
};

/// m + log(wa + wb): -inf where both are -inf.
struct MergeLseLowering : OpRewritePattern<MergeLseOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MergeLseOp op, PatternRewriter &rw) const override {
    Type elem = tensorType(op.getResult()).getElementType();
    Value res =
        elementwise(rw, op.getLoc(), op.getLhs(), elem, {op.getLhs(), op.getRhs()},
                    [](OpBuilder &b, Location l, ValueRange x) -> Value {
                      Weights w = weights(b, l, x[0], x[1]);
                      Value total = arith::AddFOp::create(b, l, w.wa, w.wb);
                      return arith::AddFOp::create(b, l, w.m, math::LogOp::create(b, l, total));
                    });
    rw.replaceOp(op, res);
    return success();
  }
};

} // namespace

void qkv::ir::populateQkvPartialsToLinalgPatterns(RewritePatternSet &patterns) {
  patterns.add<MergeAttentionLowering, MergeLseLowering>(patterns.getContext());
}
