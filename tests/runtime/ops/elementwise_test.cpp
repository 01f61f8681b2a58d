// add, sub, mul, div (the shorter operand repeats over the longer's leading dims) and
// scale.
#include <limits>

#include "test_util.hpp"

namespace qkv {
namespace {

using test::expect_values;
using test::run1;

struct Pair {
  Graph g{"elementwise"};
  Value x = g.input("x", DType::F64, {g.dim("L"), g.dim("D", 3)});
  Value y = g.input("y", DType::F64, {g.dim("L"), g.dim("D", 3)});
  Value b = g.input("b", DType::F64, {g.dim("D", 3)});
  TensorMap in{{"x", Tensor::from_f64({2, 3}, {1, 2, 3, 4, 5, 6})},
               {"y", Tensor::from_f64({2, 3}, {6, 5, 4, 3, 2, 1})},
               {"b", Tensor::from_f64({3}, {10, 20, 30})}};
};

TEST(Add, SameShape) {
  Pair p;
  p.g.output("z", add(p.x, p.y));
  expect_values(run1(p.g, p.in), {2, 3}, {7, 7, 7, 7, 7, 7});
}

TEST(Add, ShorterOperandRepeatsOverRows) {
  Pair p;
  p.g.output("z", p.x + p.b);
  // each row of x plus [10, 20, 30]
  expect_values(run1(p.g, p.in), {2, 3}, {11, 22, 33, 14, 25, 36});
}

TEST(Sub, ShorterOperandFirst) {
  Pair p;
  p.g.output("z", sub(p.b, p.x));
  // [10, 20, 30] - each row of x
  expect_values(run1(p.g, p.in), {2, 3}, {9, 18, 27, 6, 15, 24});
}

TEST(Mul, Elementwise) {
  Pair p;
  p.g.output("z", p.x * p.y);
  expect_values(run1(p.g, p.in), {2, 3}, {6, 10, 12, 12, 10, 6});
}

TEST(Div, ElementwiseAndByZeroIsIeee) {
  Pair p;
  p.g.output("z", p.x / p.b);
  expect_values(run1(p.g, p.in), {2, 3}, {0.1, 0.1, 0.1, 0.4, 0.25, 0.2});

  Graph g("div");
  Value a = g.input("a", DType::F64, {g.dim("N", 3)}),
        c = g.input("c", DType::F64, {g.dim("N", 3)});
  g.output("z", div(a, c));
  Tensor z =
      run1(g, {{"a", Tensor::from_f64({3}, {1, -1, 0})}, {"c", Tensor::from_f64({3}, {0, 0, 0})}});
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(z.get(0), inf);
  EXPECT_EQ(z.get(1), -inf);
  EXPECT_TRUE(std::isnan(z.get(2)));
}

TEST(Scale, MultipliesByTheFactor) {
  Pair p;
  p.g.output("half", scale(p.x, 0.5));
  p.g.output("quarter", p.x / 4.0);
  TensorMap out = reference::run(p.g, p.in);
  expect_values(out.at("half"), {2, 3}, {0.5, 1, 1.5, 2, 2.5, 3});
  expect_values(out.at("quarter"), {2, 3}, {0.25, 0.5, 0.75, 1, 1.25, 1.5});
}

} // namespace
} // namespace qkv
