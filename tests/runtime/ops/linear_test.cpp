// linear: x (..., K) . w (K, N) [+ bias (N)].
#include "test_util.hpp"

namespace qkv {
namespace {

using test::expect_values;
using test::run1;

// x = [[1, 2, 3], [4, 5, 6]], w = [[1, 0], [0, 1], [1, 1]] (in = 3, out = 2):
// row . w = [x0 + x2, x1 + x2] -> [[4, 5], [10, 11]].
const std::vector<double> kX = {1, 2, 3, 4, 5, 6}, kW = {1, 0, 0, 1, 1, 1};

TEST(Linear, WeightIsInByOut) {
  Graph g("linear");
  Dim L = g.dim("L"), D = g.dim("D", 3), E = g.dim("E", 2);
  Value x = g.input("x", DType::F64, {L, D}), w = g.param("w", DType::F64, {D, E});
  g.output("y", linear(x, w));
  Tensor y = run1(g, {{"x", Tensor::from_f64({2, 3}, kX)}, {"w", Tensor::from_f64({3, 2}, kW)}});
  expect_values(y, {2, 2}, {4, 5, 10, 11});
}

TEST(Linear, BiasIsAddedPerOutput) {
  Graph g("linear");
  Dim B = g.dim("B"), L = g.dim("L"), D = g.dim("D", 3), E = g.dim("E", 2);
  Value x = g.input("x", DType::F64, {B, L, D}), w = g.param("w", DType::F64, {D, E});
  Value bias = g.param("bias", DType::F64, {E});
  g.output("y", linear(x, w, bias));
  // Same rows as above, as a (2, 1, 3) batch, plus [0.5, -1].
  Tensor y = run1(g, {{"x", Tensor::from_f64({2, 1, 3}, kX)},
                      {"w", Tensor::from_f64({3, 2}, kW)},
                      {"bias", Tensor::from_f64({2}, {0.5, -1})}});
  expect_values(y, {2, 1, 2}, {4.5, 4, 10.5, 10});
}

} // namespace
} // namespace qkv
