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
// Casts also move through slices, so that an op written or read by parts fuses too (RoPE,
// whose halves read slices of its input and are inserted into its result):
//
//   - a slice of a widening (extf) is the widening of the slice, which then fuses into
//     the generic that reads the slice;
//   - a rounding (truncf) of a tensor assembled by insert_slice, its only use, is the
//     assembly of the rounded parts, each of which then takes in the generic that made
//     it; the rounding of an empty tensor is an empty tensor of the narrow type.
//
// Nothing else fuses: f32 and f64 graphs are left as they are, and so is everything
// around a matmul but its rounding (the GEMM takes elementwise consumers as epilogues,
// qkv-lower-matmul-to-microkernels). The values are the same bits: fusion moves the
// conversions, it does not remove or reorder them.
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StructuredOpsUtils.h"
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

/// Whether `g` is a cast with identity maps whose body is one `Conv` (extf: a widening,
/// truncf: a rounding).
template <typename Conv> bool isPlain(linalg::GenericOp g) {
  if (!isCast(g) ||
      !llvm::all_of(g.getIndexingMapsArray(), [](AffineMap m) { return m.isIdentity(); }))
    return false;
  Block &body = g.getRegion().front();
  return std::distance(body.begin(), body.end()) == 2 && isa<Conv>(body.front());
}

/// `g` cloned to convert `in` (of `sizes`) into a fresh empty tensor of g's result type.
/// The sizes come from the slice op, not from `in`: a tensor.dim of `in` would be a
/// second use of it, and the generic that makes it fuses into the cast only when the
/// cast is its one use.
Value castOf(PatternRewriter &rw, linalg::GenericOp g, Value in, ArrayRef<OpFoldResult> sizes) {
  Location loc = g.getLoc();
  auto to = cast<RankedTensorType>(g.getResult(0).getType());
  Value init = tensor::EmptyOp::create(rw, loc, sizes, to.getElementType());
  return clone(rw, g, TypeRange{init.getType()}, ValueRange{in, init})->getResult(0);
}

/// extract_slice(extf(x)) -> extf(extract_slice(x)).
struct SliceOfWidening : OpRewritePattern<tensor::ExtractSliceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(tensor::ExtractSliceOp s, PatternRewriter &rw) const override {
    auto g = s.getSource().getDefiningOp<linalg::GenericOp>();
    if (!g || !isPlain<arith::ExtFOp>(g) || s.getSourceType().getRank() != s.getType().getRank())
      return failure();
    Value part =
        tensor::ExtractSliceOp::create(rw, s.getLoc(), g.getDpsInputs()[0], s.getMixedOffsets(),
                                       s.getMixedSizes(), s.getMixedStrides());
    rw.replaceOp(s, castOf(rw, g, part, s.getMixedSizes()));
    return success();
  }
};

/// truncf(insert_slice(a into d)) -> insert_slice(truncf(a) into truncf(d)), when the
/// rounding is the assembly's only use; truncf(tensor.empty) -> its (empty) init.
struct RoundingOfAssembly : OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(linalg::GenericOp g, PatternRewriter &rw) const override {
    if (!isPlain<arith::TruncFOp>(g))
      return failure();
    Value in = g.getDpsInputs()[0];
    if (in.getDefiningOp<tensor::EmptyOp>()) {
      rw.replaceOp(g, g.getDpsInits()[0]);
      return success();
    }
    auto ins = in.getDefiningOp<tensor::InsertSliceOp>();
    if (!ins || !in.hasOneUse() || ins.getSourceType().getRank() != ins.getType().getRank())
      return failure();
    Value part = castOf(rw, g, ins.getSource(), ins.getMixedSizes());
    Value whole = clone(rw, g, g->getResultTypes(), ValueRange{ins.getDest(), g.getDpsInits()[0]})
                      ->getResult(0);
    rw.replaceOpWithNewOp<tensor::InsertSliceOp>(g, part, whole, ins.getMixedOffsets(),
                                                 ins.getMixedSizes(), ins.getMixedStrides());
    return success();
  }
};

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
    patterns.add<SliceOfWidening, RoundingOfAssembly>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
