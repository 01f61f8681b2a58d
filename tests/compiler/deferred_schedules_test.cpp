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
  std::vector<DeferredSchedule> taken = take_deferred_schedules(*module);
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

} // namespace
} // namespace qkv::jit
