// The polynomial exp2 the fused kernels use (compiler/lib/conversion/VectorMath.h),
// JIT-compiled through the CPU pipeline's llvm stage and measured against double exp2:
// the accuracy docs/compiler.md states comes from here.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/MemRefUtils.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/TargetSelect.h"

#include "../../compiler/lib/conversion/VectorMath.h"
#include "qkv/compiler/transforms/Passes.h"

namespace qkv::ir {
namespace {

/// void exp2_all(memref<?xT> in, memref<?xT> out), 16 (f32) or 8 (f64) lanes at a time;
/// the length must be a multiple of the lanes.
mlir::OwningOpRef<mlir::ModuleOp> exp2Module(mlir::MLIRContext &ctx, mlir::Type t, int64_t lanes) {
  mlir::OpBuilder b(&ctx);
  mlir::Location loc = b.getUnknownLoc();
  auto module = mlir::ModuleOp::create(loc);
  b.setInsertionPointToEnd(module.getBody());
  auto mt = mlir::MemRefType::get({mlir::ShapedType::kDynamic}, t);
  auto fn = mlir::func::FuncOp::create(b, loc, "exp2_all", b.getFunctionType({mt, mt}, {}));
  fn->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  mlir::Block *body = fn.addEntryBlock();
  b.setInsertionPointToStart(body);
  mlir::ImplicitLocOpBuilder ib(loc, b);
  KernelBuilder kb(ib);
  mlir::Value in = body->getArgument(0), out = body->getArgument(1);
  mlir::Value n = mlir::memref::DimOp::create(ib, in, 0);
  kb.forLoop(kb.idx(0), n, lanes, [&](KernelBuilder &k, mlir::Value i) {
    mlir::Value x = k.vload(k.vec(t, lanes), in, {i});
    k.vstore(emitExp2(k, x), out, {i});
  });
  mlir::func::ReturnOp::create(ib);
  return module;
}

template <class T> std::vector<T> runExp2(const std::vector<T> &xs) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  mlir::DialectRegistry registry;
  registerQkvDialects(registry);
  mlir::MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  mlir::Type t = sizeof(T) == 4 ? mlir::Type(mlir::Float32Type::get(&ctx))
                                : mlir::Type(mlir::Float64Type::get(&ctx));
  int64_t lanes = 64 / sizeof(T);
  auto module = exp2Module(ctx, t, lanes);
  mlir::PassManager pm(&ctx);
  registerUpstreamPassesUsedByQkv();
  registerQkvPassesAndPipelines();
  EXPECT_TRUE(addCpuStage(pm, Stage::Llvm, {}));
  EXPECT_TRUE(mlir::succeeded(pm.run(*module)));
  auto engine = mlir::ExecutionEngine::create(*module);
  EXPECT_TRUE(bool(engine));
  std::vector<T> in = xs, out(xs.size());
  StridedMemRefType<T, 1> a{in.data(), in.data(), 0, {int64_t(in.size())}, {1}};
  StridedMemRefType<T, 1> r{out.data(), out.data(), 0, {int64_t(out.size())}, {1}};
  auto *pa = &a, *pr = &r;
  void *args[] = {&pa, &pr};
  llvm::cantFail((*engine)->invokePacked("_mlir_ciface_exp2_all", args));
  return out;
}

/// Every 1/1024 step of [-126, 0] plus the edges: max relative error against double.
template <class T> double maxRelError(double &worstX) {
  std::vector<T> xs;
  for (int i = -126 * 1024; i <= 0; ++i)
    xs.push_back(T(i) / 1024);
  while (xs.size() % 16)
    xs.push_back(T(-0.3));
  std::vector<T> ys = runExp2(xs);
  double worst = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    double want = std::exp2(double(xs[i]));
    double rel = std::abs(double(ys[i]) - want) / want;
    if (rel > worst) {
      worst = rel;
      worstX = xs[i];
    }
  }
  return worst;
}

TEST(VectorMath, Exp2F32WithinTwoUlp) {
  double x = 0;
  double rel = maxRelError<float>(x);
  // f32 has 2^-24 = 6.0e-8 relative spacing: the polynomial and rounding stay within 2 ulp.
  EXPECT_LT(rel, 2 * 1.2e-7) << "worst at x = " << x;
  std::printf("exp2 f32: max relative error %.3g (at x = %g)\n", rel, x);
}

TEST(VectorMath, Exp2F64) {
  double x = 0;
  double rel = maxRelError<double>(x);
  EXPECT_LT(rel, 1e-15) << "worst at x = " << x;
  std::printf("exp2 f64: max relative error %.3g (at x = %g)\n", rel, x);
}

TEST(VectorMath, Exp2OfMinusInfinityIsZero) {
  float ninf = -std::numeric_limits<float>::infinity();
  std::vector<float> xs(16, ninf);
  xs[1] = -200.0f; // below the smallest normal: flushed to 0
  xs[2] = 0.0f;
  std::vector<float> ys = runExp2(xs);
  EXPECT_EQ(ys[0], 0.0f);
  EXPECT_EQ(ys[1], 0.0f);
  EXPECT_EQ(ys[2], 1.0f);
}

} // namespace
} // namespace qkv::ir
