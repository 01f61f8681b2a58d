// rms_norm: x / sqrt(mean(x^2) + eps) over the last axis, * gamma.
#include "test_util.hpp"

namespace qkv {
namespace {

using test::expect_values;
using test::run1;

TEST(RmsNorm, NoMeanSubtraction) {
  Graph g("rms_norm");
  Value x = g.input("x", DType::F64, {g.dim("L"), g.dim("D", 2)});
  g.output("y", rms_norm(x, 0.0));
  // [3, 4]: mean square 12.5, rms 3.5355339059327378 -> [0.848528..., 1.131370...];
  // [1, 1] has rms 1 and stays (layer_norm would make it 0/0).
  Tensor y = run1(g, {{"x", Tensor::from_f64({2, 2}, {3, 4, 1, 1})}});
  expect_values(y, {2, 2}, {0.8485281374238570, 1.1313708498984760, 1, 1}, 1e-15);
}

TEST(RmsNorm, GammaAndEps) {
  Graph g("rms_norm");
  Dim D = g.dim("D", 4);
  Value x = g.input("x", DType::F64, {D});
  Value gamma = g.param("gamma", DType::F64, {D});
  g.output("y", rms_norm(x, gamma, 12.0));
  // [2, -2, 2, -2]: mean square 4, sqrt(4 + 12) = 4 -> [0.5, -0.5, 0.5, -0.5] * [1, 2, 3, 4]
  Tensor y = run1(g, {{"x", Tensor::from_f64({4}, {2, -2, 2, -2})},
                      {"gamma", Tensor::from_f64({4}, {1, 2, 3, 4})}});
  expect_values(y, {4}, {0.5, -1, 1.5, -2});
}

} // namespace
} // namespace qkv
