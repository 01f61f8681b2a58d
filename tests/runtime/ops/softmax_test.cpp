// softmax: max-subtracted, over one axis; a row that is all -inf gives 0.
#include <cmath>
#include <limits>

#include "test_util.hpp"

namespace qkv {
namespace {

using test::expect_values;
using test::run1;

const double kInf = std::numeric_limits<double>::infinity();

Graph row_graph(std::int64_t axis = -1) {
  Graph g("softmax");
  Value x = g.input("x", DType::F64, {g.dim("L"), g.dim("S")});
  g.output("p", softmax(x, axis));
  return g;
}

TEST(Softmax, ExpOverSum) {
  // e^0, e^ln2, e^ln3 = 1, 2, 3 over their sum 6.
  Tensor p =
      run1(row_graph(), {{"x", Tensor::from_f64({1, 3}, {0, std::log(2.0), std::log(3.0)})}});
  expect_values(p, {1, 3}, {1.0 / 6, 2.0 / 6, 3.0 / 6}, 1e-15);
}

TEST(Softmax, SubtractsTheMaxSoLargeScoresDoNotOverflow) {
  // e^1000 overflows a double; with the max subtracted this is softmax([0, ln 3]) = [1/4, 3/4].
  Tensor p = run1(row_graph(), {{"x", Tensor::from_f64({1, 2}, {1000, 1000 + std::log(3.0)})}});
  expect_values(p, {1, 2}, {0.25, 0.75}, 1e-12);
}

TEST(Softmax, FullyMaskedRowIsZeroNotNaN) {
  // Row 0 is fully masked; row 1 has one masked entry, which gets probability 0.
  Tensor p =
      run1(row_graph(), {{"x", Tensor::from_f64({2, 3}, {-kInf, -kInf, -kInf, -kInf, 5, 5})}});
  expect_values(p, {2, 3}, {0, 0, 0, 0, 0.5, 0.5});
}

TEST(Softmax, OverTheFirstAxis) {
  // Columns: [0, ln 3] -> [1/4, 3/4]; [0, 0] -> [1/2, 1/2].
  Tensor p = run1(row_graph(0), {{"x", Tensor::from_f64({2, 2}, {0, 0, std::log(3.0), 0})}});
  expect_values(p, {2, 2}, {0.25, 0.5, 0.75, 0.5}, 1e-15);
}

TEST(Softmax, OverANamedMiddleAxis) {
  Graph g("softmax");
  Value x = g.input("x", DType::F32, {g.dim("A", 2), g.dim("S", 2), g.dim("C", 1)});
  g.output("p", softmax(x, "S"));
  // (a, c) rows over S: [0, 0] -> halves; [ln 3 rounded to f32, 0] -> about [3/4, 1/4].
  float ln3 = std::log(3.0f);
  Tensor p = run1(g, {{"x", Tensor::from_f32({2, 2, 1}, {0, 0, ln3, 0})}});
  expect_values(p, {2, 2, 1}, {0.5, 0.5, 0.75, 0.25}, 1e-7);
}

} // namespace
} // namespace qkv
