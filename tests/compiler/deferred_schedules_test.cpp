// A deferred attention schedule taken out of a kernel's module after the linalg stage
// (compiler/lib/DeferredSchedules.cpp), on a module written by hand: what stays behind, and
// what the schedule's own module holds when read back.
#include <gtest/gtest.h>

#include <string>

#include "DeferredSchedules.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

namespace qkv::jit {
namespace {

// The kernel calls its deferred schedule with a constant (a static dim, folded by the linalg
// stage), a value known at run time only and a buffer; the schedule asks OpenMP for its
// threads and counts into a global of the kernel.
constexpr const char *kModule = R"(
func.func private @omp_get_max_threads() -> i32
memref.global "public" @qkv_tile_counts : memref<3xi64> = dense<0>
func.func @kernel(%n: index, %out: memref<?xf32>) {
  %c4 = arith.constant 4 : index
  func.call @qkv_deferred_schedule_2(%c4, %n, %out) : (index, index, memref<?xf32>) -> ()
  return
}
func.func private @qkv_deferred_schedule_2(%heads: index, %n: index, %out: memref<?xf32>) {
  %t = func.call @omp_get_max_threads() : () -> i32
  %g = memref.get_global @qkv_tile_counts : memref<3xi64>
  %rows = arith.muli %heads, %n : index
  %x = arith.index_cast %rows : index to i64
  %c0 = arith.constant 0 : index
  memref.store %x, %g[%c0] : memref<3xi64>
  return
}
)";

TEST(DeferredSchedules, TakenOutWithWhatTheyUseAndTheirConstantsBound) {
  mlir::DialectRegistry registry;
  ir::registerQkvDialects(registry);
  mlir::MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceString<mlir::ModuleOp>(kModule, &ctx);
  ASSERT_TRUE(module);
  std::vector<HeldSchedule> held = hold_deferred_schedules(*module);
  std::vector<DeferredSchedule> taken = bind_deferred_schedules(held, *module);
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].name, "qkv_deferred_schedule_2");
  // Behind: a private declaration, still called; the kernel's global keeps its value.
  auto left = module->lookupSymbol<mlir::func::FuncOp>("qkv_deferred_schedule_2");
  ASSERT_TRUE(left);
  EXPECT_TRUE(left.isDeclaration());
  EXPECT_TRUE(left.isPrivate());
  EXPECT_TRUE(module->lookupSymbol<mlir::memref::GlobalOp>("qkv_tile_counts").getInitialValue());
  // The schedule's module: its function public with a body, the constant 4 in place of its
  // first argument, the rest still arguments; what it uses declared.
  mlir::OwningOpRef<mlir::ModuleOp> side =
      mlir::parseSourceString<mlir::ModuleOp>(taken[0].mlir, &ctx);
  ASSERT_TRUE(side) << "the bytecode reads back";
  auto fn = side->lookupSymbol<mlir::func::FuncOp>("qkv_deferred_schedule_2");
  ASSERT_TRUE(fn);
  EXPECT_FALSE(fn.isDeclaration());
  EXPECT_TRUE(fn.isPublic());
  EXPECT_TRUE(fn.getArgument(0).use_empty()) << "the constant 4 is bound in its place";
  EXPECT_FALSE(fn.getArgument(1).use_empty());
  bool four = false;
  fn.walk([&](mlir::arith::MulIOp mul) {
    if (auto c = mul.getLhs().getDefiningOp<mlir::arith::ConstantIndexOp>())
      four = c.value() == 4;
  });
  EXPECT_TRUE(four) << "heads * n reads the constant";
  auto threads = side->lookupSymbol<mlir::func::FuncOp>("omp_get_max_threads");
  ASSERT_TRUE(threads);
  EXPECT_TRUE(threads.isDeclaration());
  auto counts = side->lookupSymbol<mlir::memref::GlobalOp>("qkv_tile_counts");
  ASSERT_TRUE(counts);
  EXPECT_TRUE(counts.isExternal()) << "declared without its value: the kernel defines it";
  EXPECT_TRUE(counts.isPublic());
  EXPECT_FALSE(side->lookupSymbol("kernel")) << "nothing else of the kernel";
}

// A JIT compile holds the schedule out right after the flash pass, when its call still
// computes the constant (heads / groups here); the rest of the linalg stage folds it on the
// kernel's side, and only then is the schedule bound to it.
constexpr const char *kUnfolded = R"(
func.func @kernel(%n: index) {
  %c8 = arith.constant 8 : index
  %c2 = arith.constant 2 : index
  %heads = arith.divui %c8, %c2 : index
  func.call @qkv_deferred_schedule_0(%heads, %n) : (index, index) -> ()
  return
}
func.func private @qkv_deferred_schedule_0(%heads: index, %n: index) {
  %rows = arith.muli %heads, %n : index
  return
}
)";

TEST(DeferredSchedules, HeldBeforeTheCallsConstantsFoldAndBoundAfter) {
  mlir::DialectRegistry registry;
  ir::registerQkvDialects(registry);
  mlir::MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(kUnfolded, &ctx);
  ASSERT_TRUE(module);
  std::vector<HeldSchedule> held = hold_deferred_schedules(*module);
  ASSERT_EQ(held.size(), 1u);
  EXPECT_TRUE(module->lookupSymbol<mlir::func::FuncOp>("qkv_deferred_schedule_0").isDeclaration())
      << "the kernel's own passes no longer see the schedule's body";
  mlir::PassManager pm(&ctx);
  ir::addCpuLinalgTail(pm);
  ASSERT_TRUE(mlir::succeeded(ir::runStage(pm, *module)));
  std::vector<DeferredSchedule> bound = bind_deferred_schedules(held, *module);
  ASSERT_EQ(bound.size(), 1u);
  mlir::OwningOpRef<mlir::ModuleOp> side =
      mlir::parseSourceString<mlir::ModuleOp>(bound[0].mlir, &ctx);
  ASSERT_TRUE(side);
  auto fn = side->lookupSymbol<mlir::func::FuncOp>("qkv_deferred_schedule_0");
  ASSERT_TRUE(fn);
  EXPECT_TRUE(fn.getArgument(0).use_empty()) << "8 / 2, folded by the tail, is bound";
  EXPECT_FALSE(fn.getArgument(1).use_empty());
}

} // namespace
} // namespace qkv::jit
