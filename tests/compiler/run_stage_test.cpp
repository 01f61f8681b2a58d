// How a compile runs a stage's passes (qkv::ir::runStage, runStageOrThrow): the IR
// verified once, after the stage's last pass, or after every pass with QKV_VERIFY_EACH=1.
// The same test runs both ways (tests/compiler/CMakeLists.txt): a pass that leaves the IR
// invalid must fail the stage either way, and only with QKV_VERIFY_EACH does the stage
// stop right after it.
#include <gtest/gtest.h>

#include <string>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

#include "qkv/compiler/transforms/Passes.h"
#include <qkv/compiler/compile.hpp>
#include <qkv/runtime/env.hpp>

namespace qkv::ir {
namespace {

/// Takes the returned value out of every func.return: the function still says it returns
/// one, which the verifier rejects.
struct DropReturnedValues
    : mlir::PassWrapper<DropReturnedValues, mlir::OperationPass<mlir::ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(DropReturnedValues)
  void runOnOperation() override {
    getOperation().walk([](mlir::func::ReturnOp r) { r->eraseOperands(0, r->getNumOperands()); });
  }
};

/// Counts its runs: whether the stage went on after the broken IR.
struct CountRuns : mlir::PassWrapper<CountRuns, mlir::OperationPass<mlir::ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(CountRuns)
  explicit CountRuns(int &runs) : runs(&runs) {}
  void runOnOperation() override { ++*runs; }
  int *runs;
};

TEST(RunStage, InvalidIrFailsTheStageWithTheVerifiersDiagnostic) {
  mlir::DialectRegistry registry;
  registerQkvDialects(registry);
  mlir::MLIRContext ctx(registry, mlir::MLIRContext::Threading::DISABLED);
  ctx.loadAllAvailableDialects();
  std::string diags;
  ctx.getDiagEngine().registerHandler([&](mlir::Diagnostic &d) { diags += d.str() + "\n"; });
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceString<mlir::ModuleOp>(
      "func.func @f(%a: f32) -> f32 { return %a : f32 }", &ctx);
  ASSERT_TRUE(module);
  int later_runs = 0;
  mlir::PassManager pm(&ctx);
  pm.addPass(std::make_unique<DropReturnedValues>());
  pm.addPass(std::make_unique<CountRuns>(later_runs));
  EXPECT_TRUE(mlir::failed(runStage(pm, *module)));
  EXPECT_NE(diags.find("has 0 operands, but enclosing function (@f) returns 1"), std::string::npos)
      << diags;
  bool each = env_switch("QKV_VERIFY_EACH").value_or(false);
  EXPECT_EQ(verifyEachPass(), each);
  // Verified after every pass, the stage stops at the pass that broke the IR; verified at
  // its end, the passes after it still run (and the stage fails at the end).
  EXPECT_EQ(later_runs, each ? 0 : 1);
}

TEST(RunStage, ValidIrPasses) {
  mlir::DialectRegistry registry;
  registerQkvDialects(registry);
  mlir::MLIRContext ctx(registry, mlir::MLIRContext::Threading::DISABLED);
  ctx.loadAllAvailableDialects();
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceString<mlir::ModuleOp>(
      "func.func @f(%a: f32) -> f32 { return %a : f32 }", &ctx);
  ASSERT_TRUE(module);
  int runs = 0;
  mlir::PassManager pm(&ctx);
  pm.addPass(std::make_unique<CountRuns>(runs));
  EXPECT_TRUE(mlir::succeeded(runStage(pm, *module)));
  EXPECT_EQ(runs, 1);
}

/// Reports an error on the module and does not fail, as some conversions do.
struct ReportWithoutFailing
    : mlir::PassWrapper<ReportWithoutFailing, mlir::OperationPass<mlir::ModuleOp>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(ReportWithoutFailing)
  void runOnOperation() override { getOperation().emitError("cannot convert this"); }
};

// runStageOrThrow: a failed stage throws CompileError naming the stage, the prefix and the
// diagnostics; an error reported by passes that all succeeded fails the stage only with
// anyDiagnosticFails (the CUDA pipeline's stages).
TEST(RunStage, OrThrowNamesTheStageAndFailsOnDiagnosticsWhenAsked) {
  mlir::DialectRegistry registry;
  registerQkvDialects(registry);
  mlir::MLIRContext ctx(registry, mlir::MLIRContext::Threading::DISABLED);
  ctx.loadAllAvailableDialects();
  std::string diags;
  ctx.getDiagEngine().registerHandler([&](mlir::Diagnostic &d) { diags += d.str() + "\n"; });
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceString<mlir::ModuleOp>(
      "func.func @f(%a: f32) -> f32 { return %a : f32 }", &ctx);
  ASSERT_TRUE(module);
  auto report = [](mlir::OpPassManager &pm) {
    pm.addPass(std::make_unique<ReportWithoutFailing>());
    return true;
  };
  EXPECT_NO_THROW(runStageOrThrow(*module, "loops", diags, report));
  try {
    runStageOrThrow(*module, "gpu", diags, report, "the kernel: ", /*anyDiagnosticFails=*/true);
    ADD_FAILURE() << "no CompileError";
  } catch (const CompileError &e) {
    EXPECT_EQ(e.stage(), "gpu");
    EXPECT_NE(std::string(e.what()).find("the kernel: "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cannot convert this"), std::string::npos) << e.what();
  }
  diags.clear();
  auto broken = [](mlir::OpPassManager &pm) {
    pm.addPass(std::make_unique<DropReturnedValues>());
    return true;
  };
  EXPECT_THROW(runStageOrThrow(*module, "llvm", diags, broken), CompileError);
}

} // namespace
} // namespace qkv::ir
