// sinusoidal_pe: x + PE(p, d), p = offset + row, angle = p / base^(2(d/2)/D), sin for even
// d, cos for odd d.
#include "test_util.hpp"

namespace qkv {
namespace {

using test::expect_values;
using test::run1;

// sin 1, cos 1, sin 0.01, cos 0.01
constexpr double kS1 = 0.8414709848078965, kC1 = 0.5403023058681398;
constexpr double kS01 = 0.009999833334166664, kC01 = 0.9999500004166653;

TEST(SinusoidalPE, FourFeatures) {
  Graph g("pe");
  Value x = g.input("x", DType::F64, {g.dim("L"), g.dim("D", 4)});
  g.output("y", sinusoidal_pe(x));
  // D = 4: features 0, 1 use angle p / 10000^0 = p; features 2, 3 use p / 10000^(2/4) =
  // p / 100. Row 0 (p = 0): [sin 0, cos 0, sin 0, cos 0]; row 1: [sin 1, cos 1, sin .01,
  // cos .01]. x = 0 except x[1][3] = 1.
  Tensor y = run1(g, {{"x", Tensor::from_f64({2, 4}, {0, 0, 0, 0, 0, 0, 0, 1})}});
  expect_values(y, {2, 4}, {0, 1, 0, 1, kS1, kC1, kS01, kC01 + 1}, 1e-15);
}

TEST(SinusoidalPE, OddFeatureCountAndOffset) {
  Graph g("pe");
  Value x = g.input("x", DType::F64, {g.dim("L"), g.dim("D", 3)});
  g.output("y", sinusoidal_pe(x, 10000, 1));
  // D = 3, offset 1, one row: p = 1. Features 0, 1: angle 1. Feature 2 (i = 1): angle
  // 1 / 10000^(2/3) = 10^(-8/3) = 0.0021544346900318843, whose sine is
  // a - a^3/6 + ... = 0.0021544346900318843 - 1e-8/6 = 0.0021544330233652.
  Tensor y = run1(g, {{"x", Tensor(DType::F64, {1, 3})}});
  expect_values(y, {1, 3}, {kS1, kC1, 0.0021544330233652}, 1e-15);
}

TEST(SinusoidalPE, SamePositionsForEveryBatch) {
  Graph g("pe");
  Value x = g.input("x", DType::F64, {g.dim("B"), g.dim("L"), g.dim("D", 2)});
  g.output("y", sinusoidal_pe(x, 1.0));
  // base 1: every angle is p. Rows p = 0, 1 in both batches; batch 1 has x = 1.
  Tensor y = run1(g, {{"x", Tensor::from_f64({2, 2, 2}, {0, 0, 0, 0, 1, 1, 1, 1})}});
  expect_values(y, {2, 2, 2}, {0, 1, kS1, kC1, 1, 2, 1 + kS1, 1 + kC1}, 1e-15);
}

} // namespace
} // namespace qkv
