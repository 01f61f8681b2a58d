// linformer_project: x (..., S, D), e (K', S) -> e . x (..., K', D).
#include "test_util.hpp"

namespace qkv {
namespace {

using test::expect_values;
using test::run1;

TEST(LinformerProject, ProjectsTheSequenceAxis) {
  Graph g("linformer");
  Dim S = g.dim("S");
  Value x = g.input("x", DType::F64, {g.dim("B"), S, g.dim("D", 2)});
  Value e = g.param("e", DType::F64, {g.dim("K", 2), S});
  g.output("y", linformer_project(x, e));
  // e = [[1, 0, 1], [0, 1, 0]]: row 0 sums positions 0 and 2, row 1 picks position 1.
  // batch 0: x = [[1, 2], [3, 4], [5, 6]] -> [[6, 8], [3, 4]]
  // batch 1: x = 10 * batch 0      -> [[60, 80], [30, 40]]
  Tensor y =
      run1(g, {{"x", Tensor::from_f64({2, 3, 2}, {1, 2, 3, 4, 5, 6, 10, 20, 30, 40, 50, 60})},
               {"e", Tensor::from_f64({2, 3}, {1, 0, 1, 0, 1, 0})}});
  expect_values(y, {2, 2, 2}, {6, 8, 3, 4, 60, 80, 30, 40});
}

} // namespace
} // namespace qkv
