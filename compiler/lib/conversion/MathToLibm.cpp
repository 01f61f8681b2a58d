// qkv-math-to-libm: convert-math-to-libm where a module still holds a math op after
// convert-math-to-llvm (f64 erf, which has no LLVM intrinsic). Most modules have none, and
// the upstream conversion would still walk every op of them.
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/PassManager.h"

#include "qkv/compiler/transforms/Passes.h"

namespace qkv::ir {
#define GEN_PASS_DEF_MATHTOLIBM
#include "qkv/compiler/transforms/Passes.h.inc"
} // namespace qkv::ir

using namespace mlir;

namespace {

struct MathToLibmPass : qkv::ir::impl::MathToLibmBase<MathToLibmPass> {
  void runOnOperation() override {
    bool any = getOperation()
                   .walk([](Operation *op) {
                     return isa<math::MathDialect>(op->getDialect()) ? WalkResult::interrupt()
                                                                     : WalkResult::advance();
                   })
                   .wasInterrupted();
    if (!any)
      return;
    OpPassManager pm(ModuleOp::getOperationName());
    pm.addPass(createConvertMathToLibmPass());
    if (failed(runPipeline(pm, getOperation())))
      signalPassFailure();
  }
};

} // namespace
