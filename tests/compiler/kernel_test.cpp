// Kernel behaviour around the compiled code: argument checks (nothing written on a bad
// input), IR stages, QKV_DUMP, and compile-time errors.
#include <cstdlib>

#include <gtest/gtest.h>

#include "qkv_test/errors.hpp"

#include <qkv/compiler/compile.hpp>
#include <qkv/runtime/interpreter.hpp>

namespace qkv {
namespace {

Graph small_graph() {
  Graph g("small");
  Dim L = g.dim("L"), D = g.dim("D", 4), V = g.dim("V", 6);
  Value ids = g.input("ids", DType::I32, {L});
  Value x = embedding(ids, g.param("table", DType::F32, {V, D}));
  g.output("y", linear(x, g.param("w", DType::F32, {D, D})));
  return g;
}

using test::error_of;

class KernelTest : public ::testing::Test {
protected:
  static void SetUpTestSuite() { kernel_ = new Kernel(compile(small_graph())); }
  static void TearDownTestSuite() { delete kernel_; }
  static TensorMap inputs(std::int64_t l = 5) {
    return random_inputs(kernel_->graph(), {{"L", l}}, 1);
  }
  static Kernel *kernel_;
};
Kernel *KernelTest::kernel_ = nullptr;

TEST_F(KernelTest, RunsAndAgreesWithInterpreter) {
  TensorMap in = inputs();
  Comparison c =
      compare(kernel_->run(in).at("y"), reference::run(kernel_->graph(), in).at("y"), 1e-5, 1e-4);
  EXPECT_TRUE(c.ok) << c.message;
}

TEST_F(KernelTest, MissingInputIsNamed) {
  TensorMap in = inputs();
  in.erase("w");
  EXPECT_NE(error_of([&] { kernel_->run(in); }).find("missing param 'w'"), std::string::npos);
}

TEST_F(KernelTest, UnknownInputIsNamed) {
  TensorMap in = inputs();
  in["wq"] = Tensor(DType::F32, {4, 4});
  std::string e = error_of([&] { kernel_->run(in); });
  EXPECT_NE(e.find("unknown input 'wq'"), std::string::npos) << e;
}

TEST_F(KernelTest, WrongDtypeIsNamed) {
  TensorMap in = inputs();
  in["w"] = in["w"].to(DType::F64);
  std::string e = error_of([&] { kernel_->run(in); });
  EXPECT_NE(e.find("'w' must be f32, got f64"), std::string::npos) << e;
}

TEST_F(KernelTest, WrongStaticDimIsNamed) {
  TensorMap in = inputs();
  in["w"] = Tensor(DType::F32, {4, 5});
  std::string e = error_of([&] { kernel_->run(in); });
  EXPECT_NE(e.find("dim 'D' must be 4, got 5"), std::string::npos) << e;
}

TEST_F(KernelTest, WrongRankIsNamed) {
  TensorMap in = inputs();
  in["ids"] = Tensor(DType::I32, {5, 1});
  std::string e = error_of([&] { kernel_->run(in); });
  EXPECT_NE(e.find("'ids'"), std::string::npos) << e;
  EXPECT_NE(e.find("[5, 1]"), std::string::npos) << e;
}

TEST_F(KernelTest, OutOfRangeEmbeddingIdIsAnErrorNotACrash) {
  TensorMap in = inputs();
  in["ids"].set(2, 6); // the table has 6 rows: 0..5
  std::string e = error_of([&] { kernel_->run(in); });
  EXPECT_NE(e.find("id 6"), std::string::npos) << e;
  EXPECT_NE(e.find("6 rows"), std::string::npos) << e;
}

TEST_F(KernelTest, EveryStageHasIr) {
  for (const std::string &s : Kernel::stage_names())
    EXPECT_FALSE(kernel_->ir(s).empty()) << s;
  EXPECT_NE(kernel_->ir("qkv").find("qkv.embedding"), std::string::npos);
  EXPECT_NE(kernel_->ir("linalg").find("linalg.generic"), std::string::npos);
  EXPECT_NE(kernel_->ir("loops").find("scf.for"), std::string::npos);
  EXPECT_NE(kernel_->ir("llvm").find("llvm.func"), std::string::npos);
  EXPECT_NE(kernel_->ir("llvm-ir").find("define"), std::string::npos);
  std::string as = kernel_->ir("asm");
  EXPECT_NE(as.find("ret"), std::string::npos) << as.substr(0, 500);
  EXPECT_NE(as.find(kernel_->symbol()), std::string::npos);
  std::string e = error_of([&] { kernel_->ir("ptx"); });
  EXPECT_NE(e.find("unknown IR stage 'ptx'"), std::string::npos) << e;
}

TEST_F(KernelTest, StatsCoverTheStages) {
  const CompileStats &s = kernel_->stats();
  EXPECT_GT(s.total_ms, 0);
  ASSERT_GE(s.stage_ms.size(), 5u);
  EXPECT_EQ(s.stage_ms[1].first, "qkv");
}

TEST(Compile, DumpOptionPrintsStagesToStderr) {
  CompileOptions o;
  o.dump = {"qkv", "llvm"};
  testing::internal::CaptureStderr();
  compile(small_graph(), Target::host(), o);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("qkv stage 'qkv' of graph 'small'"), std::string::npos) << err;
  EXPECT_NE(err.find("qkv stage 'llvm' of graph 'small'"), std::string::npos);
  EXPECT_EQ(err.find("qkv stage 'loops'"), std::string::npos);
}

TEST(Compile, UnknownDumpStageIsAnError) {
  CompileOptions o;
  o.dump = {"bogus"};
  std::string e = error_of([&] { compile(small_graph(), Target::host(), o); });
  EXPECT_NE(e.find("unknown stage 'bogus'"), std::string::npos) << e;
}

TEST(Compile, HalfPrecisionIsRejectedClearly) {
  Graph g("half");
  Dim L = g.dim("L");
  g.output("y", silu(g.input("x", DType::F16, {L})));
  std::string e = error_of([&] { compile(g); });
  EXPECT_NE(e.find("'x' is f16"), std::string::npos) << e;
}

TEST(Compile, InvalidGraphIsRejectedBeforeMlir) {
  Graph g("no_outputs");
  g.input("x", DType::F32, {g.dim("L")});
  std::string e = error_of([&] { compile(g); });
  EXPECT_NE(e.find("has no outputs"), std::string::npos) << e;
}

TEST(Compile, PipelineStagesArePrintable) {
  EXPECT_NE(cpu_stage_pipeline("qkv").find("qkv-recognize-attention"), std::string::npos);
  EXPECT_NE(cpu_stage_pipeline("loops").find("one-shot-bufferize"), std::string::npos);
  EXPECT_NE(error_of([] { cpu_stage_pipeline("gpu"); }).find("unknown CPU pipeline stage"),
            std::string::npos);
}

} // namespace
} // namespace qkv
