// linear_attention: phi(q_i) . sum_j phi(k_j) v_j^T / (phi(q_i) . sum_j phi(k_j)).
#include <cmath>

#include "test_util.hpp"

namespace qkv {
namespace {

using test::expect_values;
using test::run1;

struct Rank2 {
  Graph g{"linear_attention"};
  Dim Dh = g.dim("Dh", 2), S = g.dim("S");
  Value q = g.input("q", DType::F64, {g.dim("L"), Dh});
  Value k = g.input("k", DType::F64, {S, Dh});
  Value v = g.input("v", DType::F64, {S, g.dim("Dv", 1)});
};

TEST(LinearAttention, ReluFeatureMap) {
  Rank2 t;
  t.g.output("y", linear_attention(t.q, t.k, t.v, FeatureMap::Relu));
  // k = I, v = [2, 4]: sum_j phi(k_j) v_j = [2, 4], sum_j phi(k_j) = [1, 1].
  //   q = [1, 0]:  2 / 1 = 2
  //   q = [1, 1]:  (2 + 4) / 2 = 3
  //   q = [-1, -1]: relu gives 0, denominator 0 -> 0
  Tensor y = run1(t.g, {{"q", Tensor::from_f64({3, 2}, {1, 0, 1, 1, -1, -1})},
                        {"k", Tensor::from_f64({2, 2}, {1, 0, 0, 1})},
                        {"v", Tensor::from_f64({2, 1}, {2, 4})}});
  expect_values(y, {3, 1}, {2, 3, 0});
}

TEST(LinearAttention, EluPlusOneFeatureMap) {
  Rank2 t;
  t.g.output("y", linear_attention(t.q, t.k, t.v));
  // phi(x) = x + 1 for x > 0, e^x otherwise.
  // k0 = [1, 0] -> [2, 1]; k1 = [0, -ln 2] -> [1, 0.5]; q = [0, 0] -> [1, 1].
  // weights phi(q).phi(k_j) = 3 and 1.5; out = (3*2 + 1.5*4) / 4.5 = 12 / 4.5.
  Tensor y = run1(t.g, {{"q", Tensor::from_f64({1, 2}, {0, 0})},
                        {"k", Tensor::from_f64({2, 2}, {1, 0, 0, -std::log(2.0)})},
                        {"v", Tensor::from_f64({2, 1}, {2, 4})}});
  expect_values(y, {1, 1}, {12.0 / 4.5}, 1e-15);
}

TEST(LinearAttention, GroupedQueryHeadsShareKvHeads) {
  Graph g("linear_attention");
  Dim Dh = g.dim("Dh", 1), S = g.dim("S", 1), L = g.dim("L", 1);
  Value q = g.input("q", DType::F64, {g.dim("H", 4), L, Dh});
  Value k = g.input("k", DType::F64, {g.dim("KVH", 2), S, Dh});
  Value v = g.input("v", DType::F64, {g.dim("KVH", 2), S, Dh});
  g.output("y", linear_attention(q, k, v, FeatureMap::Relu));
  // One key per kv head, so each output is that head's v: query heads 0, 1 read kv head
  // 0 (v = 10) and heads 2, 3 read kv head 1 (v = 20).
  Tensor y = run1(g, {{"q", Tensor::from_f64({4, 1, 1}, {1, 1, 1, 1})},
                      {"k", Tensor::from_f64({2, 1, 1}, {1, 1})},
                      {"v", Tensor::from_f64({2, 1, 1}, {10, 20})}});
  expect_values(y, {4, 1, 1}, {10, 10, 20, 20});
}

} // namespace
} // namespace qkv
