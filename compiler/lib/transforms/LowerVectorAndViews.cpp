// qkv-lower-vector-and-views: the rewrites that come before the conversion to LLVM, in
// one greedy walk of the module: vector ops to the 1-D forms LLVM has (the lowering
// patterns upstream's convert-vector-to-llvm applies before it converts) and memref views
// to the strided metadata they stand for (expand-strided-metadata's patterns). The walk
// does not simplify regions (merge blocks, drop block arguments): the module has just
// been canonicalized, and that simplification cost more than the rewrites.
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/Transforms/Transforms.h"
#include "mlir/Dialect/Vector/Transforms/LoweringPatterns.h"
#include "mlir/Dialect/Vector/Transforms/VectorRewritePatterns.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "qkv/compiler/transforms/Passes.h"

namespace qkv::ir {
#define GEN_PASS_DEF_LOWERVECTORANDVIEWS
#include "qkv/compiler/transforms/Passes.h.inc"
} // namespace qkv::ir

using namespace mlir;
using namespace mlir::vector;

namespace {

/// Upstream convert-vector-to-llvm's first step, with its defaults (32-bit mask indices,
/// element-wise transposes) and the contraction lowering asked for.
void populateVectorLowering(RewritePatternSet &patterns, VectorContractLowering contract) {
  populateVectorToVectorCanonicalizationPatterns(patterns);
  populateVectorBitCastLoweringPatterns(patterns);
  populateVectorBroadcastLoweringPatterns(patterns);
  populateVectorContractLoweringPatterns(patterns, contract);
  populateVectorMaskOpLoweringPatterns(patterns);
  populateVectorShapeCastLoweringPatterns(patterns);
  populateVectorInterleaveLoweringPatterns(patterns);
  populateVectorTransposeLoweringPatterns(patterns, VectorTransposeLowering::EltWise);
  // Transfers of rank 2 and more were unrolled by the passes that made them.
  populateVectorTransferLoweringPatterns(patterns, /*maxTransferRank=*/1);
  populateVectorMaskMaterializationPatterns(patterns, /*force32BitVectorIndices=*/true);
  populateVectorInsertExtractStridedSliceTransforms(patterns);
  populateVectorStepLoweringPatterns(patterns);
  populateVectorRankReducingFMAPattern(patterns);
  populateVectorGatherLoweringPatterns(patterns);
}

struct LowerVectorAndViewsPass : qkv::ir::impl::LowerVectorAndViewsBase<LowerVectorAndViewsPass> {
  using Base::Base;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateVectorLowering(patterns, outerProduct ? VectorContractLowering::OuterProduct
                                                  : VectorContractLowering::Dot);
    memref::populateExpandStridedMetadataPatterns(patterns);
    GreedyRewriteConfig config;
    config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
    // As both upstream passes: a walk that has not converged after its iterations leaves
    // what it did (the conversion reports what is left), rather than failing the compile.
    (void)applyPatternsGreedily(getOperation(), std::move(patterns), config);
  }
};

} // namespace
