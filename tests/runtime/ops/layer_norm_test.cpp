// layer_norm: (x - mean) / sqrt(var + eps) over the last axis (biased var), * gamma + beta.
#include "test_util.hpp"

namespace qkv {
namespace {

using test::expect_values;
using test::run1;

// x = [1, 2, 3, 4]: mean 2.5, var (2.25 + 0.25 + 0.25 + 2.25) / 4 = 1.25, sqrt 1.25 =
// 1.118033988749895; (x - 2.5) / 1.118... = [-1.5, -0.5, 0.5, 1.5] / 1.118...
constexpr double kA = 1.3416407864998738, kB = 0.4472135954999579;

TEST(LayerNorm, NormalisesEachRow) {
  Graph g("layer_norm");
  Value x = g.input("x", DType::F64, {g.dim("L"), g.dim("D", 4)});
  g.output("y", layer_norm(x, 0.0));
  // Row 1 is row 0 shifted and scaled by 10: the same result.
  Tensor y = run1(g, {{"x", Tensor::from_f64({2, 4}, {1, 2, 3, 4, 20, 30, 40, 50})}});
  expect_values(y, {2, 4}, {-kA, -kB, kB, kA, -kA, -kB, kB, kA}, 1e-14);
}

TEST(LayerNorm, GammaAndBeta) {
  Graph g("layer_norm");
  Dim D = g.dim("D", 4);
  Value x = g.input("x", DType::F64, {g.dim("L"), D});
  Value gamma = g.param("gamma", DType::F64, {D}), beta = g.param("beta", DType::F64, {D});
  g.output("y", layer_norm(x, gamma, beta, 0.0));
  // gamma [1, 2, 1, 2], beta [0, 0, 1, 1]
  Tensor y = run1(g, {{"x", Tensor::from_f64({1, 4}, {1, 2, 3, 4})},
                      {"gamma", Tensor::from_f64({4}, {1, 2, 1, 2})},
                      {"beta", Tensor::from_f64({4}, {0, 0, 1, 1})}});
  expect_values(y, {1, 4}, {-kA, -2 * kB, kB + 1, 2 * kA + 1}, 1e-14);
}

TEST(LayerNorm, EpsIsAddedToTheVariance) {
  Graph g("layer_norm");
  Value x = g.input("x", DType::F64, {g.dim("D", 2)});
  g.output("y", layer_norm(x, 3.0));
  // [0, 2]: mean 1, var 1, sqrt(1 + 3) = 2 -> [-0.5, 0.5]
  expect_values(run1(g, {{"x", Tensor::from_f64({2}, {0, 2})}}), {2}, {-0.5, 0.5});
}

} // namespace
} // namespace qkv
