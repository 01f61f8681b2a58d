// qkv-expand-bf16-conversions: bf16 widening and rounding as integer ops, for CPUs without
// bf16 converts (the f32 tier), where LLVM would call __truncsfbf2 once per element.
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "qkv/compiler/transforms/Passes.h"

namespace qkv::ir {
#define GEN_PASS_DEF_EXPANDBF16CONVERSIONS
#include "qkv/compiler/transforms/Passes.h.inc"
} // namespace qkv::ir

using namespace mlir;

namespace {

struct ExpandBf16ConversionsPass
    : qkv::ir::impl::ExpandBf16ConversionsBase<ExpandBf16ConversionsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    arith::populateExpandBFloat16Patterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
