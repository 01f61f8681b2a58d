// score_mod: score := expr(score, b, h, q, kv) at every element.
#include <cmath>

#include "test_util.hpp"

namespace qkv {
namespace {

using test::expect_values;
using test::run1;

TEST(ScoreMod, RelativePositionBias) {
  Graph g("score_mod");
  Value s = g.input("s", DType::F64, {g.dim("L"), g.dim("S")});
  g.output("y", score_mod(s, [](auto s, auto, auto, auto q, auto kv) { return s + (kv - q); }));
  // [[10 + 0, 10 + 1], [10 - 1, 10 + 0]]
  Tensor y = run1(g, {{"s", Tensor::from_f64({2, 2}, {10, 10, 10, 10})}});
  expect_values(y, {2, 2}, {10, 11, 9, 10});
}

TEST(ScoreMod, AlibiSlopesCapturedPerHead) {
  Graph g("score_mod");
  Dim H = g.dim("H", 2);
  Value s = g.input("s", DType::F64, {H, g.dim("L"), g.dim("S")});
  Value slopes = g.param("slopes", DType::F64, {H});
  g.output("y", score_mod(s, [&](auto s, auto, auto h, auto q, auto kv) {
             return s + slopes[h] * (kv - q);
           }));
  // zero scores; head 0 slope 0.5, head 1 slope 0.25: slope * (kv - q)
  Tensor y = run1(
      g, {{"s", Tensor(DType::F64, {2, 2, 2})}, {"slopes", Tensor::from_f64({2}, {0.5, 0.25})}});
  expect_values(y, {2, 2, 2}, {0, 0.5, -0.5, 0, /* head 1 */ 0, 0.25, -0.25, 0});
}

TEST(ScoreMod, Softcap) {
  Graph g("score_mod");
  Value s = g.input("s", DType::F64, {g.dim("L", 1), g.dim("S", 2)});
  g.output("y", score_mod(s, [](auto s, auto, auto, auto, auto) { return 2.0 * tanh(s / 2.0); }));
  // 2 tanh(0) = 0; 2 tanh(1) = 2 * 0.7615941559557649
  Tensor y = run1(g, {{"s", Tensor::from_f64({1, 2}, {0, 2})}});
  expect_values(y, {1, 2}, {0, 1.5231883119115297}, 1e-15);
}

TEST(ScoreMod, IntegerResultBecomesTheScore) {
  Graph g("score_mod");
  Value s = g.input("s", DType::F64, {g.dim("B", 2), g.dim("H", 1), g.dim("L", 1), g.dim("S", 2)});
  // An integer expression is a valid new score: 10 b + kv.
  g.output("y", score_mod(s, [](auto, auto b, auto, auto, auto kv) { return b * 10 + kv; }));
  Tensor y = run1(g, {{"s", Tensor(DType::F64, {2, 1, 1, 2})}});
  expect_values(y, {2, 1, 1, 2}, {0, 1, 10, 11});
}

} // namespace
} // namespace qkv
