// qkv-recognize-attention: matmul(q, transpose(k)) -> [scale] -> [score_mod] -> [mask]
// -> softmax(last axis) -> matmul(., v)  ==>  qkv.attention.
//
// The order is the attention op's own (score_mod sees the scaled score; the mask comes
// last), so the rewrite changes nothing the interpreter computes. Every intermediate must
// have exactly one use, so fusing never computes anything twice.
#include "LoweringUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "qkv/compiler/transforms/Passes.h"

namespace qkv::ir {
#define GEN_PASS_DEF_RECOGNIZEATTENTION
#include "qkv/compiler/transforms/Passes.h.inc"
} // namespace qkv::ir

using namespace mlir;
using namespace qkv::ir;

namespace {

template <class OpT> OpT singleUseDef(Value v) {
  auto op = v.getDefiningOp<OpT>();
  if (!op || !op->getResult(0).hasOneUse())
    return nullptr;
  return op;
}

/// Moves `from` (a mod region with its own captures) into `to`, whose block takes the
/// lead arguments and then all of `allCaps`.
void moveModRegion(OpBuilder &b, Region &from, ValueRange fromCaps, Region &to, ValueRange allCaps,
                   unsigned lead) {
  Block &old = from.front();
  SmallVector<Type> types;
  SmallVector<Location> locs;
  for (unsigned i = 0; i < lead; ++i) {
    types.push_back(old.getArgument(i).getType());
    locs.push_back(old.getArgument(i).getLoc());
  }
  for (Value c : allCaps) {
    types.push_back(c.getType());
    locs.push_back(c.getLoc());
  }
  OpBuilder::InsertionGuard g(b);
  Block *nb = b.createBlock(&to, {}, types, locs);
  IRMapping map;
  for (unsigned i = 0; i < lead; ++i)
    map.map(old.getArgument(i), nb->getArgument(i));
  for (auto [i, c] : llvm::enumerate(fromCaps)) {
    auto it = llvm::find(allCaps, c);
    map.map(old.getArgument(lead + i), nb->getArgument(lead + (it - allCaps.begin())));
  }
  for (Operation &op : old)
    b.clone(op, map);
}

struct RecognizeAttentionPattern : OpRewritePattern<MatMulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MatMulOp pv, PatternRewriter &rw) const override {
    auto soft = singleUseDef<SoftmaxOp>(pv.getLhs());
    if (!soft)
      return rw.notifyMatchFailure(pv, "lhs is not a single-use softmax");
    int64_t r = tensorType(soft.getX()).getRank();
    if (normalizeAxis(soft.getAxis(), r) != r - 1 || r < 2 || r > 4)
      return rw.notifyMatchFailure(pv, "softmax is not over the last axis of rank 2..4 scores");
    Value v = pv.getRhs();
    if (tensorType(v).getRank() != r)
      return rw.notifyMatchFailure(pv, "v is broadcast");

    Value s = soft.getX();
    MaskOp mask = singleUseDef<MaskOp>(s);
    if (mask)
      s = mask.getScores();
    ScoreModOp score = singleUseDef<ScoreModOp>(s);
    if (score)
      s = score.getScores();
    double scale = 1.0;
    if (auto sc = singleUseDef<ScaleOp>(s)) {
      scale = sc.getFactor().convertToDouble();
      s = sc.getX();
    }
    auto qk = singleUseDef<MatMulOp>(s);
    if (!qk)
      return rw.notifyMatchFailure(pv, "scores do not come from a single-use matmul");
    auto kt = qk.getRhs().getDefiningOp<TransposeOp>();
    int64_t ka = kt ? normalizeAxis(kt.getAxisA(), r) : 0, kb = kt ? normalizeAxis(kt.getAxisB(), r) : 0;
    if (!kt || ka + kb != 2 * r - 3 || ka < r - 2 || kb < r - 2)
      return rw.notifyMatchFailure(pv, "the scores' rhs is not k with its last two axes swapped");
    Value q = qk.getLhs(), k = kt.getX();
    auto qt = tensorType(q), kT = tensorType(k), vt = tensorType(v);
    if (qt.getRank() != r || kT.getRank() != r)
      return rw.notifyMatchFailure(pv, "q or k is broadcast");
    if (qt.getElementType() != vt.getElementType())
      return rw.notifyMatchFailure(pv, "element types differ");

    SmallVector<Value> caps;
    auto addCaps = [&](ValueRange cs) {
      for (Value c : cs)
        if (!llvm::is_contained(caps, c))
          caps.push_back(c);
    };
    if (score)
      addCaps(score.getCaptures());
    if (mask)
      addCaps(mask.getCaptures());

    auto att = AttentionOp::create(rw, pv.getLoc(), pv.getType(), /*lse=*/Type(), q, k, v, caps,
                                   rw.getF64FloatAttr(scale));
    if (score)
      moveModRegion(rw, score.getBody(), score.getCaptures(), att.getScore(), caps, 7);
    if (mask)
      moveModRegion(rw, mask.getBody(), mask.getCaptures(), att.getMask(), caps, 6);
    rw.replaceOp(pv, att.getResult());
    return success();
  }
};

struct RecognizeAttentionPass : qkv::ir::impl::RecognizeAttentionBase<RecognizeAttentionPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<RecognizeAttentionPattern>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
