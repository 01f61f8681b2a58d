// qkv-fuse-casts: a half-precision graph's conversions fused into the elementwise ops
// around them.
//
// A bf16 or f16 graph computes each op in f32 and rounds its result (docs/compiler.md,
// "Half precision"), so after qkv-lower-to-linalg and convert-elementwise-to-linalg every
// op is wrapped in generics of their own: one widening each operand (bf16 -> f32), one
// rounding the result (f32 -> bf16), each a pass over memory. Upstream's elementwise
// fusion, restricted by its control function, folds them into their neighbours:
//
//   - a cast (a generic whose body only converts its one input) fuses into every
//     generic that reads it, which then reads the narrow tensor and converts per element
//     (recomputing a conversion is cheaper than a pass over memory);
//   - an elementwise generic with a single use fuses into the cast that reads it, which
//     then writes the rounded result directly.
//
// Nothing else fuses: f32 and f64 graphs are left as they are, and so is everything
// around a matmul but its rounding (the GEMM takes elementwise consumers as epilogues,
// qkv-lower-matmul-to-microkernels). The values are the same bits: fusion moves the
// conversions, it does not remove or reorder them.
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "qkv/compiler/transforms/Passes.h"

namespace qkv::ir {
#define GEN_PASS_DEF_FUSECASTS
#include "qkv/compiler/transforms/Passes.h.inc"
} // namespace qkv::ir

using namespace mlir;

namespace {

bool allParallel(linalg::GenericOp g) { return g.getNumLoops() == g.getNumParallelLoops(); }

/// Whether `g` only converts its one input between float types (one extf/truncf or a
/// chain of them: a rounding is a truncf then an extf).
bool isCast(linalg::GenericOp g) {
  if (g.getNumDpsInputs() != 1 || g.getNumDpsInits() != 1 || !allParallel(g))
    return false;
  Block &body = g.getRegion().front();
  return llvm::all_of(body.without_terminator(),
                      [](Operation &op) { return isa<arith::ExtFOp, arith::TruncFOp>(op); });
}

bool fuseHere(OpOperand *operand) {
  auto producer = operand->get().getDefiningOp<linalg::GenericOp>();
  auto consumer = dyn_cast<linalg::GenericOp>(operand->getOwner());
  if (!producer || !consumer || !allParallel(producer))
    return false;
  if (isCast(producer))
    return true;
  return isCast(consumer) && producer->getNumResults() == 1 &&
         producer->getResult(0).hasOneUse();
}

struct FuseCastsPass : qkv::ir::impl::FuseCastsBase<FuseCastsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    linalg::populateElementwiseOpsFusionPatterns(patterns, fuseHere);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
