// rope: pairs of features rotated by p * base^(-2i/Dh), p = offset + row.
#include "test_util.hpp"

namespace qkv {
namespace {

using test::expect_values;
using test::run1;

// Dh = 4, base 10000: theta_0 = 1, theta_1 = 10000^(-2/4) = 0.01. At p = 1 the angles are
// 1 and 0.01.
constexpr double kS1 = 0.8414709848078965, kC1 = 0.5403023058681398;
constexpr double kS01 = 0.009999833334166664, kC01 = 0.9999500004166653;

Graph rope_graph(RopeOptions opts) {
  Graph g("rope");
  Value x = g.input("x", DType::F64, {g.dim("L"), g.dim("Dh", 4)});
  g.output("y", rope(x, opts));
  return g;
}

// rows p = 0 and p = 1, both [1, 2, 3, 4]
const Tensor kTwoRows = Tensor::from_f64({2, 4}, {1, 2, 3, 4, 1, 2, 3, 4});

TEST(Rope, HalvesPairing) {
  // Pairs (i, i + 2): (x0, x2) = (1, 3) by angle 1 and (x1, x3) = (2, 4) by angle 0.01:
  //   y0 = 1 cos 1 - 3 sin 1,       y2 = 1 sin 1 + 3 cos 1
  //   y1 = 2 cos .01 - 4 sin .01,   y3 = 2 sin .01 + 4 cos .01
  // Row 0 (angle 0) is unchanged.
  Tensor y = run1(rope_graph({}), {{"x", kTwoRows}});
  expect_values(
      y, {2, 4},
      {1, 2, 3, 4, kC1 - 3 * kS1, 2 * kC01 - 4 * kS01, kS1 + 3 * kC1, 2 * kS01 + 4 * kC01}, 1e-15);
  // The same numbers written out, to catch a mistake in the expressions above.
  EXPECT_NEAR(y.at({1, 0}), -1.9841106485555495, 1e-15);
  EXPECT_NEAR(y.at({1, 3}), 4.019799668334994, 1e-15);
}

TEST(Rope, InterleavedPairing) {
  // Pairs (2i, 2i + 1): (1, 2) by angle 1 and (3, 4) by angle 0.01.
  Tensor y = run1(rope_graph({.interleaved = true}), {{"x", kTwoRows}});
  expect_values(
      y, {2, 4},
      {1, 2, 3, 4, kC1 - 2 * kS1, kS1 + 2 * kC1, 3 * kC01 - 4 * kS01, 3 * kS01 + 4 * kC01}, 1e-15);
}

TEST(Rope, OffsetShiftsPositions) {
  // With offset 1 the first row is at p = 1: the same as row 1 above.
  Tensor y = run1(rope_graph({.offset = 1}), {{"x", Tensor::from_f64({1, 4}, {1, 2, 3, 4})}});
  expect_values(y, {1, 4}, {kC1 - 3 * kS1, 2 * kC01 - 4 * kS01, kS1 + 3 * kC1, 2 * kS01 + 4 * kC01},
                1e-15);
}

TEST(Rope, PositionIsTheSecondToLastAxis) {
  Graph g("rope");
  Value x = g.input("x", DType::F64, {g.dim("H", 2), g.dim("L", 1), g.dim("Dh", 2)});
  g.output("y", rope(x, {.base = 1.0, .offset = 2}));
  // Dh = 2, one pair (x0, x1), angle p * 1 = 2 for both heads (their one row is p = 2).
  // (1, 0) -> (cos 2, sin 2); (0, 1) -> (-sin 2, cos 2).
  constexpr double kS2 = 0.9092974268256817, kC2 = -0.4161468365471424;
  Tensor y = run1(g, {{"x", Tensor::from_f64({2, 1, 2}, {1, 0, 0, 1})}});
  expect_values(y, {2, 1, 2}, {kC2, kS2, -kS2, kC2}, 1e-15);
}

} // namespace
} // namespace qkv
