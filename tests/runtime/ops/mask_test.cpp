// mask: scores where the mask_mod is false become -inf. Scores are (q, kv), (h, q, kv) or
// (b, h, q, kv).
#include <limits>

#include "test_util.hpp"

namespace qkv {
namespace {

using test::expect_values;
using test::run1;

const double X = -std::numeric_limits<double>::infinity(); // a masked score

// scores 1..9 as a 3x3 (q, kv) matrix
Tensor nine() { return Tensor::from_f64({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9}); }

Graph square(const MaskFn &m) {
  Graph g("mask");
  Value s = g.input("s", DType::F64, {g.dim("L"), g.dim("S")});
  g.output("y", mask(s, m));
  return g;
}

TEST(Mask, Causal) {
  // kept where q >= kv: the lower triangle
  expect_values(run1(square(causal_mask()), {{"s", nine()}}), {3, 3}, {1, X, X, 4, 5, X, 7, 8, 9});
}

TEST(Mask, SlidingWindow) {
  // q >= kv && q - kv < 2: each row keeps itself and one step back
  expect_values(run1(square(sliding_window_mask(2)), {{"s", nine()}}), {3, 3},
                {1, X, X, 4, 5, X, X, 8, 9});
}

TEST(Mask, LambdaWithLengths) {
  // Causal aligned to the end when L != S: kv <= q + (len_kv - len_q). With L = 2, S = 3
  // query 0 sees kv 0..1 and query 1 sees kv 0..2.
  Graph g =
      square(mask_fn([](auto, auto, auto q, auto kv) { return kv <= q + len_kv() - len_q(); }));
  Tensor y = run1(g, {{"s", Tensor::from_f64({2, 3}, {1, 2, 3, 4, 5, 6})}});
  expect_values(y, {2, 3}, {1, 2, X, 4, 5, 6});
}

TEST(Mask, DocumentIdsFromAnI32Table) {
  Graph g("mask");
  Dim S = g.dim("S");
  Value s = g.input("s", DType::F64, {S, S});
  Value doc = g.input("doc", DType::I32, {S});
  g.output("y", mask(s, [&](auto, auto, auto q, auto kv) { return doc[q] == doc[kv]; }));
  // doc = [0, 0, 1]: tokens 0 and 1 see each other, token 2 only itself.
  Tensor y = run1(g, {{"s", nine()}, {"doc", Tensor::from_i32({3}, {0, 0, 1})}});
  expect_values(y, {3, 3}, {1, 2, X, 4, 5, X, X, X, 9});
}

TEST(Mask, BatchAndHeadAxes) {
  Graph g("mask");
  Value s = g.input("s", DType::F64, {g.dim("B", 2), g.dim("H", 2), g.dim("L", 1), g.dim("S", 2)});
  // keep kv == (b + h) % 2: (b, h) = (0, 0) and (1, 1) keep kv 0; (0, 1) and (1, 0) keep kv 1.
  g.output("y", mask(s, [](auto b, auto h, auto, auto kv) { return kv == (b + h) % 2; }));
  Tensor y = run1(g, {{"s", Tensor::from_f64({2, 2, 1, 2}, {0, 1, 2, 3, 4, 5, 6, 7})}});
  expect_values(y, {2, 2, 1, 2}, {0, X, X, 3, X, 5, 6, X});
}

TEST(Mask, HeadAxisOfRank3) {
  Graph g("mask");
  Value s = g.input("s", DType::F64, {g.dim("H", 2), g.dim("L", 1), g.dim("S", 2)});
  // b is 0 for rank 3, so only kv == h + b survives
  g.output("y", mask(s, [](auto b, auto h, auto, auto kv) { return kv == h + b; }));
  Tensor y = run1(g, {{"s", Tensor::from_f64({2, 1, 2}, {1, 2, 3, 4})}});
  expect_values(y, {2, 1, 2}, {1, X, X, 4});
}

} // namespace
} // namespace qkv
