// The differential harness itself, driven by hand-written kernels (a packed entry point
// in C++ instead of compiled code): each rule it promises must fail a kernel or a case
// that breaks it.
#include <cstdint>
#include <initializer_list>
#include <string_view>

#include <gtest/gtest-spi.h>

#include "differential.hpp"

namespace qkv::test {
namespace {

// What the fake kernel does: out = 2 x, with a twist.
enum class Fake { Double, DoubleAndWriteInput, DoubleOffBy, Ratio, OverZero, Zero };
Fake g_fake = Fake::Double;
double g_off = 0; // relative error of Fake::DoubleOffBy

/// The data pointer and extent of packed argument i (a rank-1 f32 memref descriptor:
/// allocated, aligned, offset, size, stride).
float *arg_data(void **args, int i, std::int64_t &n) {
  auto *d = *static_cast<std::int64_t **>(args[i]);
  n = d[3];
  return reinterpret_cast<float *>(d[1]) + d[2];
}

void fake_entry(void **args) {
  std::int64_t n = 0, m = 0;
  float *x = arg_data(args, 0, n), *out = arg_data(args, 1, m);
  for (std::int64_t i = 0; i < n; ++i) {
    switch (g_fake) {
    case Fake::Double:
    case Fake::DoubleAndWriteInput: out[i] = 2 * x[i]; break;
    case Fake::DoubleOffBy: out[i] = static_cast<float>(2.0 * x[i] * (1 + g_off)); break;
    case Fake::Ratio: out[i] = x[i] / x[i]; break;
    case Fake::OverZero: out[i] = x[i] / (x[i] - x[i]); break;
    case Fake::Zero: out[i] = 0; break;
    }
  }
  if (g_fake == Fake::DoubleAndWriteInput && n > 0)
    x[n - 1] = 0;
}

/// out = 2 x in bf16 (x and out bf16 (L)), then g_ulps units in the last place further from 0.
int g_ulps = 0;
void fake_bf16_entry(void **args) {
  auto *x = *static_cast<std::int64_t **>(args[0]), *o = *static_cast<std::int64_t **>(args[1]);
  const auto *in = reinterpret_cast<const std::uint16_t *>(x[1]) + x[2];
  auto *out = reinterpret_cast<std::uint16_t *>(o[1]) + o[2];
  for (std::int64_t i = 0; i < x[3]; ++i)
    out[i] = static_cast<std::uint16_t>(float_to_bf16(2 * bf16_to_float(in[i])) + g_ulps);
}

/// A Kernel for graph `g` (one f32 input x (L), one output) that runs fake_entry.
Kernel fake_kernel(const Graph &g, Fake how) {
  g_fake = how;
  KernelEntry e;
  e.packed = fake_entry;
  e.symbol = "fake";
  return Kernel(g, e, {}, nullptr, CompileStats{});
}

/// Every gtest failure `f` reports, one per line ("" when it reports none).
template <class F> std::string failures_of(F &&f) {
  testing::TestPartResultArray results;
  {
    testing::ScopedFakeTestPartResultReporter reporter(
        testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
    f();
  }
  std::string all;
  for (int i = 0; i < results.size(); ++i)
    all += std::string(results.GetTestPartResult(i).message()) + "\n";
  return all;
}

DiffCase case_of(std::function<Value(Value)> f) {
  return one_output("fake", [f](Graph &g) { return f(g.input("x", DType::F32, {g.dim("L")})); },
                    {{{"L", 64}}});
}

DiffCase doubling() {
  return case_of([](Value x) { return scale(x, 2.0); });
}

/// Passes when `failures` holds every part (and so at least one failure).
testing::AssertionResult Says(const std::string &failures,
                              std::initializer_list<std::string_view> parts) {
  for (std::string_view p : parts)
    if (failures.find(p) == std::string::npos)
      return testing::AssertionFailure() << "the failures\n" << failures << "lack\n  " << p;
  return testing::AssertionSuccess();
}

TEST(Harness, ACorrectKernelPasses) {
  DiffCase c = doubling();
  Kernel k = fake_kernel(c.build(), Fake::Double);
  EXPECT_EQ(failures_of([&] { check_kernel(k, c); }), "");
}

TEST(Harness, AKernelThatWritesItsInputFails) {
  DiffCase c = doubling();
  Kernel k = fake_kernel(c.build(), Fake::DoubleAndWriteInput);
  EXPECT_TRUE(Says(failures_of([&] { check_kernel(k, c); }), {"the kernel changed its input 'x'"}));
}

TEST(Harness, ErrorsPastTheToleranceFailAndErrorsWithinPass) {
  // n = 1, M = 1: allowed = 8 eps (1 + |want|), about 1e-6 relative for |want| near 1.
  DiffCase c = doubling();
  Kernel k = fake_kernel(c.build(), Fake::DoubleOffBy);
  g_off = 4e-6;
  EXPECT_TRUE(Says(failures_of([&] { check_kernel(k, c); }),
                   {"output 'out' (n = 1, M = 1)", "elements differ"}));
  g_off = 2e-7;
  EXPECT_EQ(failures_of([&] { check_kernel(k, c); }), "");
}

TEST(Harness, ToleranceIsTheDocumentedRule) {
  Tolerance t = tolerance(DType::F32, 10, 3);
  EXPECT_DOUBLE_EQ(t.rtol, kTolC * 0x1p-23 * 10);
  EXPECT_DOUBLE_EQ(t.atol, kTolC * 0x1p-23 * 10 * 3);
  EXPECT_DOUBLE_EQ(tolerance(DType::F64, 10, 3).rtol, kTolC * 0x1p-52 * 10);
  EXPECT_EQ(tolerance(DType::I32, 10, 3).rtol, 0);
}

TEST(Harness, HalfOutputsAreHeldToTheirUlps) {
  // within_half_ulps(2): two bf16 ulps of the largest output (2^-6 at |out| <= 2) plus
  // f32's rule. One ulp off passes; four fail, though bf16's general rule (8 eps n M,
  // 0.0625 here) would let them through.
  DiffCase c = one_output("fake_bf16", [](Graph &g) { return scale(g.input("x", DType::BF16, {g.dim("L")}), 2.0); },
                          {{{"L", 64}}});
  c.within_half_ulps(2);
  KernelEntry e;
  e.packed = fake_bf16_entry;
  e.symbol = "fake_bf16";
  Kernel k(c.build(), e, {}, nullptr, CompileStats{});
  g_ulps = 1;
  EXPECT_EQ(failures_of([&] { check_kernel(k, c); }), "");
  g_ulps = 4;
  EXPECT_TRUE(Says(failures_of([&] { check_kernel(k, c); }), {"output 'out'", "elements differ"}));
  g_ulps = 0;
}

TEST(Harness, ReductionDimsAddUp) {
  // n = 1 + L = 65: the allowed error is 65 times that of n = 1, and 4e-6 passes.
  DiffCase c = doubling();
  c.sums({"L"});
  Kernel k = fake_kernel(c.build(), Fake::DoubleOffBy);
  g_off = 4e-6;
  EXPECT_EQ(failures_of([&] { check_kernel(k, c); }), "");
  c.sums({"nosuch"});
  EXPECT_TRUE(Says(failures_of([&] { check_kernel(k, c); }),
                   {"reduction dim 'nosuch' is not a dim of the graph"}));
}

TEST(Harness, ANaNReferenceFailsEvenWhenTheKernelAgrees) {
  // x / x with x[0] = 0: both give NaN there; NaN vs NaN proves nothing.
  DiffCase c = case_of([](Value x) { return div(x, x); });
  c.inputs([](TensorMap &in) { in.at("x").set(0, 0); });
  Kernel k = fake_kernel(c.build(), Fake::Ratio);
  EXPECT_TRUE(
      Says(failures_of([&] { check_kernel(k, c); }),
           {"the reference output 'out' is ", "nan at flat index 0", "1 of 64 elements differ"}));
}

TEST(Harness, AnInfiniteReferenceFailsUnlessTheCaseAllowsIt) {
  // x / (x - x) with x = 1: +inf in the reference and in the fake.
  DiffCase c = case_of([](Value x) { return div(x, sub(x, x)); });
  c.inputs([](TensorMap &in) {
    Tensor &x = in.at("x");
    for (std::int64_t i = 0; i < x.numel(); ++i)
      x.set(i, 1.0);
  });
  Kernel k = fake_kernel(c.build(), Fake::OverZero);
  EXPECT_TRUE(Says(failures_of([&] { check_kernel(k, c); }),
                   {"the reference output 'out' is inf at flat index 0"}));
  c.may_be_infinite();
  EXPECT_EQ(failures_of([&] { check_kernel(k, c); }), "");
}

TEST(Harness, AnAllZeroReferenceFailsUnlessTheCaseAllowsIt) {
  DiffCase c = case_of([](Value x) { return sub(x, x); });
  Kernel k = fake_kernel(c.build(), Fake::Zero);
  EXPECT_TRUE(
      Says(failures_of([&] { check_kernel(k, c); }), {"the reference output 'out' is all zeros"}));
  c.may_be_zero();
  EXPECT_EQ(failures_of([&] { check_kernel(k, c); }), "");
}

TEST(Harness, LargeInputsScaleOnlyTheNamedInputs) {
  Graph g("g");
  Dim L = g.dim("L");
  Value x = g.input("x", DType::F32, {L}), y = g.input("y", DType::F32, {L});
  Value p = g.param("p", DType::F32, {L});
  g.output("out", add(add(x, y), p));
  TensorMap in = random_inputs(g, {{"L", 3}}, 1), before = deep_copy(in);
  scale_inputs(g, in, 10, {});
  for (const char *name : {"x", "y"})
    EXPECT_FLOAT_EQ(in.at(name).get(1), 10 * before.at(name).get(1)) << name;
  EXPECT_TRUE(same_bits(in.at("p"), before.at("p"))) << "params keep their scale";
  in = deep_copy(before);
  scale_inputs(g, in, 10, {"y"});
  EXPECT_TRUE(same_bits(in.at("x"), before.at("x")));
  EXPECT_FLOAT_EQ(in.at("y").get(1), 10 * before.at("y").get(1));
  EXPECT_TRUE(Says(failures_of([&] { scale_inputs(g, in, 10, {"z"}); }),
                   {"large_inputs names 'z', not an input of the graph"}));
}

} // namespace
} // namespace qkv::test
