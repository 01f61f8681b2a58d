// transpose: swaps two axes.
#include "test_util.hpp"

namespace qkv {
namespace {

using test::expect_values;
using test::run1;

TEST(Transpose, LastTwoAxesByDefault) {
  Graph g("transpose");
  Value x = g.input("x", DType::F64, {g.dim("L"), g.dim("D", 3)});
  g.output("y", transpose(x));
  // [[0, 1, 2], [3, 4, 5]] -> [[0, 3], [1, 4], [2, 5]]
  Tensor y = run1(g, {{"x", Tensor::from_f64({2, 3}, {0, 1, 2, 3, 4, 5})}});
  expect_values(y, {3, 2}, {0, 3, 1, 4, 2, 5});
}

TEST(Transpose, OuterAxesByNumberAndByName) {
  Graph g("transpose");
  Value x = g.input("x", DType::F64, {g.dim("A", 2), g.dim("B", 1), g.dim("C", 3)});
  // x[a][0][c] = 3a + c; y[c][0][a] = x[a][0][c]: rows c = 0, 1, 2 are [c, 3 + c].
  g.output("y", transpose(x, 0, 2));
  g.output("z", transpose(x, "C", "A"));
  TensorMap out = reference::run(g, {{"x", Tensor::from_f64({2, 1, 3}, {0, 1, 2, 3, 4, 5})}});
  expect_values(out.at("y"), {3, 1, 2}, {0, 3, 1, 4, 2, 5});
  expect_values(out.at("z"), {3, 1, 2}, {0, 3, 1, 4, 2, 5});
}

TEST(Transpose, NegativeAxesOfRank4) {
  Graph g("transpose");
  Value x = g.input("x", DType::F64, {g.dim("B", 1), g.dim("H", 2), g.dim("L", 2), g.dim("D", 1)});
  // Swapping H and L of (1, 2, 2, 1): x[0][h][l][0] = 2h + l -> y[0][l][h][0].
  g.output("y", transpose(x, -3, -2));
  Tensor y = run1(g, {{"x", Tensor::from_f64({1, 2, 2, 1}, {0, 1, 2, 3})}});
  expect_values(y, {1, 2, 2, 1}, {0, 2, 1, 3});
}

} // namespace
} // namespace qkv
