// qkv-lower-to-linalg: every qkv op except attention (qkv-lower-attention-to-flash) and the
// checks (qkv-lower-checks) becomes linalg on tensors, through the pattern families of
// QkvToLinalg.h under a ConversionTarget: a qkv op without a lowering fails the pass,
// naming the op, rather than a later stage.
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Transforms/DialectConversion.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "QkvToLinalg.h"
#include "qkv/compiler/transforms/Passes.h"

namespace qkv::ir {
#define GEN_PASS_DEF_LOWERTOLINALG
#include "qkv/compiler/transforms/Passes.h.inc"
} // namespace qkv::ir

using namespace mlir;
using namespace qkv::ir;

namespace {

struct LowerToLinalgPass : qkv::ir::impl::LowerToLinalgBase<LowerToLinalgPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateQkvProductsToLinalgPatterns(patterns);
    populateQkvElementwiseToLinalgPatterns(patterns);
    populateQkvLayoutToLinalgPatterns(patterns);
    populateQkvPositionsAndModsToLinalgPatterns(patterns);
    populateQkvPartialsToLinalgPatterns(patterns);
    ConversionTarget target(getContext());
    target.addIllegalDialect<QkvDialect>();
    target.addLegalDialect<linalg::LinalgDialect, tensor::TensorDialect, arith::ArithDialect,
                           math::MathDialect, scf::SCFDialect>();
    // Attention keeps its mod regions (their qkv.yield and qkv.check) for its own pass;
    // the checks inlined from mask and score_mod regions stay for qkv-lower-checks.
    target.addLegalOp<AttentionOp, CheckOp, YieldOp>();
    target.markOpRecursivelyLegal<AttentionOp>();
    if (failed(applyPartialConversion(getOperation(), target, std::move(patterns))))
      return signalPassFailure();
    // The lowerings make their constants where they need them (inside generic bodies
    // too): one of each, at the function's entry, keeps the IR small for what follows.
    GreedyRewriteConfig config;
    config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
    (void)applyPatternsGreedily(getOperation(), FrozenRewritePatternSet(), config);
  }
};

} // namespace
