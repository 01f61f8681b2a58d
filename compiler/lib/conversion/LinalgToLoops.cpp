// qkv-linalg-to-loops: convert-linalg-to-parallel-loops where a function still holds a
// linalg op. After the GEMM and elementwise lowerings most functions have none, and the
// upstream pass's greedy driver would still fold every op of them.
#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Pass/PassManager.h"

#include "qkv/compiler/transforms/Passes.h"

namespace qkv::ir {
#define GEN_PASS_DEF_LINALGTOLOOPS
#include "qkv/compiler/transforms/Passes.h.inc"
} // namespace qkv::ir

using namespace mlir;

namespace {

struct LinalgToLoopsPass : qkv::ir::impl::LinalgToLoopsBase<LinalgToLoopsPass> {
  void runOnOperation() override {
    bool any = getOperation()
                   .walk([](linalg::LinalgOp) { return WalkResult::interrupt(); })
                   .wasInterrupted();
    if (!any)
      return;
    OpPassManager pm(func::FuncOp::getOperationName());
    pm.addPass(createConvertLinalgToParallelLoopsPass());
    if (failed(runPipeline(pm, getOperation())))
      signalPassFailure();
  }
};

} // namespace
