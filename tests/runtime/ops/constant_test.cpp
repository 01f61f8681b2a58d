// constant: values stored in the graph, row-major.
#include "test_util.hpp"

namespace qkv {
namespace {

using test::expect_values;
using test::run1;

TEST(Constant, ValuesAreRowMajor) {
  Graph g("constant");
  Dim L = g.dim("L", 2), D = g.dim("D", 2);
  Value c = g.constant("c", {L, D}, {1, 2, 3, 4});
  Value x = g.input("x", DType::F32, {L, D});
  g.output("y", x + c);
  Tensor y = run1(g, {{"x", Tensor::from_f32({2, 2}, {10, 20, 30, 40})}});
  expect_values(y, {2, 2}, {11, 22, 33, 44});
}

TEST(Constant, CapturedByAMod) {
  Graph g("constant");
  Dim H = g.dim("H", 2);
  Value slopes = g.constant("slopes", {H}, {1, -1});
  Value s = g.input("s", DType::F32, {H, g.dim("L", 1), g.dim("S", 2)});
  g.output("y",
           score_mod(s, [&](auto s, auto, auto h, auto, auto kv) { return s + slopes[h] * kv; }));
  // head 0: [0 + 0, 0 + 1]; head 1: [0 - 0, 0 - 1]
  Tensor y = run1(g, {{"s", Tensor(DType::F32, {2, 1, 2})}});
  expect_values(y, {2, 1, 2}, {0, 1, 0, -1});
}

} // namespace
} // namespace qkv
