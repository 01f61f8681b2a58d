// concat: the inputs one after another along an axis.
#include "test_util.hpp"

namespace qkv {
namespace {

using test::expect_values;
using test::run1;

TEST(Concat, AlongTheLastAxis) {
  Graph g("concat");
  Dim L = g.dim("L");
  Value a = g.input("a", DType::F64, {L, g.dim("A", 1)});
  Value b = g.input("b", DType::F64, {L, g.dim("B", 2)});
  g.output("y", concat({a, b}));
  // [[1], [2]] ++ [[3, 4], [5, 6]] = [[1, 3, 4], [2, 5, 6]]
  Tensor y = run1(
      g, {{"a", Tensor::from_f64({2, 1}, {1, 2})}, {"b", Tensor::from_f64({2, 2}, {3, 4, 5, 6})}});
  expect_values(y, {2, 3}, {1, 3, 4, 2, 5, 6});
}

TEST(Concat, ThreeDynamicPartsAlongTheFirstAxis) {
  // P + Q + R is a derived dim, bound from the parts' extents (1 + 2 + 1).
  Graph g("concat");
  Dim D = g.dim("D", 2);
  Value a = g.input("a", DType::F64, {g.dim("P"), D});
  Value b = g.input("b", DType::F64, {g.dim("Q"), D});
  Value c = g.input("c", DType::F64, {g.dim("R"), D});
  g.output("y", concat({a, b, c}, 0));
  Tensor y = run1(g, {{"a", Tensor::from_f64({1, 2}, {1, 2})},
                      {"b", Tensor::from_f64({2, 2}, {3, 4, 5, 6})},
                      {"c", Tensor::from_f64({1, 2}, {7, 8})}});
  expect_values(y, {4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
}

TEST(Concat, MiddleAxisOfRank3) {
  Graph g("concat");
  Dim B = g.dim("B", 2), D = g.dim("D", 1);
  Value a = g.input("a", DType::F64, {B, g.dim("P", 1), D});
  Value b = g.input("b", DType::F64, {B, g.dim("Q", 1), D});
  g.output("y", concat({a, b}, 1, g.dim("S", 2)));
  // batch 0: [a0, b0] = [1, 3]; batch 1: [a1, b1] = [2, 4]
  Tensor y = run1(
      g, {{"a", Tensor::from_f64({2, 1, 1}, {1, 2})}, {"b", Tensor::from_f64({2, 1, 1}, {3, 4})}});
  expect_values(y, {2, 2, 1}, {1, 3, 2, 4});
}

} // namespace
} // namespace qkv
