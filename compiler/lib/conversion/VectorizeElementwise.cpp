// qkv-vectorize-elementwise: elementwise and innermost-reduction linalg.generic ops on
// buffers -> vector loops, parallel over their outer loops (VectorizedGeneric).
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Approximation.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

#include "VectorizedGeneric.h"
#include "qkv/compiler/transforms/Passes.h"

namespace qkv::ir {
#define GEN_PASS_DEF_VECTORIZEELEMENTWISE
#include "qkv/compiler/transforms/Passes.h.inc"
} // namespace qkv::ir

using namespace mlir;
using namespace qkv::ir;

namespace {

struct GenericToVectorLoops : OpInterfaceRewritePattern<linalg::LinalgOp> {
  GenericToVectorLoops(MLIRContext *ctx, int64_t vectorBits)
      : OpInterfaceRewritePattern(ctx), vectorBits(vectorBits) {}

  LogicalResult matchAndRewrite(linalg::LinalgOp linalgOp, PatternRewriter &rewriter) const override {
    // Copies and transposes (a head split or merge) as the generics they are.
    linalg::GenericOp op = dyn_cast<linalg::GenericOp>(linalgOp.getOperation());
    if (isa<linalg::TransposeOp, linalg::CopyOp>(linalgOp.getOperation()) &&
        linalgOp.hasPureBufferSemantics()) {
      FailureOr<linalg::GenericOp> generic = linalg::generalizeNamedOp(rewriter, linalgOp);
      if (failed(generic))
        return failure();
      op = *generic;
    }
    std::optional<VectorizedGeneric> g = op ? VectorizedGeneric::analyse(op, vectorBits) : std::nullopt;
    if (!g)
      return failure();
    ImplicitLocOpBuilder ib(op.getLoc(), rewriter);
    KernelBuilder kb(ib);
    SmallVector<Range, 4> ranges =
        cast<linalg::LinalgOp>(op.getOperation()).createLoopRanges(rewriter, op.getLoc());
    auto size = [&](unsigned d) { return getValueOrCreateConstantIndexOp(ib, ib.getLoc(), ranges[d].size); };
    Value inner = size(g->loops() - 1);
    SmallVector<Value> operands(op->getOperands());
    if (g->loops() == 1) {
      g->emitRow(kb, {}, kb.idx(0), inner, operands);
    } else {
      SmallVector<Value> outer;
      for (unsigned d = 0; d + 1 < g->loops(); ++d)
        outer.push_back(size(d));
      kb.parallel(outer, [&](KernelBuilder &in, ValueRange iv) {
        g->emitRow(in, iv, in.idx(0), inner, operands);
      });
    }
    rewriter.eraseOp(op);
    return success();
  }

  int64_t vectorBits;
};

struct VectorizeElementwisePass
    : qkv::ir::impl::VectorizeElementwiseBase<VectorizeElementwisePass> {
  using VectorizeElementwiseBase::VectorizeElementwiseBase;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<GenericToVectorLoops>(&getContext(), vectorBits);
    walkAndApplyPatterns(getOperation(), std::move(patterns));
    // The transcendental ops of the vector code as MLIR's polynomial approximations
    // (exp, tanh, erf, log, ... on f32): LLVM would call libm once per lane.
    SmallVector<Operation *> math;
    getOperation().walk([&](Operation *op) {
      if (isa<math::MathDialect>(op->getDialect()) && op->getNumResults() == 1 &&
          isa<VectorType>(op->getResult(0).getType()))
        math.push_back(op);
    });
    RewritePatternSet approx(&getContext());
    populateMathPolynomialApproximationPatterns(approx);
    if (!math.empty() && failed(applyOpPatternsGreedily(math, std::move(approx))))
      signalPassFailure();
  }
};

} // namespace
