// attention: softmax(mask(score_mod(scale * q.k))) . v, with GQA/MQA, cross-attention
// and the mods evaluated at every (b, query head, q, kv).
//
// Most cases use Dh = 1 and q = 0, so every raw score is 0 and the probabilities come
// from the mods alone: the expected outputs are averages of v rows.
#include <cmath>

#include "test_util.hpp"

namespace qkv {
namespace {

using test::expect_values;
using test::run1;

/// (L, Dh) / (S, Dh) / (S, Dv) inputs with dynamic L, S.
struct Rank2 {
  Graph g{"attention"};
  Dim Dh, Dv;
  Value q, k, v;
  explicit Rank2(std::int64_t dh = 1, std::int64_t dv = 1)
      : Dh(g.dim("Dh", dh)), Dv(g.dim("Dv", dv)) {
    Dim L = g.dim("L"), S = g.dim("S");
    q = g.input("q", DType::F64, {L, Dh});
    k = g.input("k", DType::F64, {S, Dh});
    v = g.input("v", DType::F64, {S, Dv});
  }
};

Tensor zeros(Shape s) { return Tensor(DType::F64, std::move(s)); }
const Tensor kV3 = Tensor::from_f64({3, 1}, {3, 6, 9});

TEST(Attention, DefaultScaleIsOneOverSqrtDh) {
  Rank2 t(4);
  t.g.output("o", attention(t.q, t.k, t.v));
  // Dh = 4 -> scale 1/2. q . k = [0, 2 ln 3] -> scores [0, ln 3] -> p = [1/4, 3/4];
  // out = 4/4 + 8 * 3/4 = 7.
  double l3 = std::log(3.0);
  Tensor o = run1(t.g, {{"q", Tensor::from_f64({1, 4}, {2 * l3, 0, 0, 0})},
                        {"k", Tensor::from_f64({2, 4}, {0, 0, 0, 0, 1, 0, 0, 0})},
                        {"v", Tensor::from_f64({2, 1}, {4, 8})}});
  expect_values(o, {1, 1}, {7}, 1e-14);
}

TEST(Attention, ExplicitScale) {
  Rank2 t(4);
  t.g.output("o", attention(t.q, t.k, t.v).scale(1.0));
  // scale 1: scores [0, ln 3] directly from q = [ln 3, 0, 0, 0].
  Tensor o = run1(t.g, {{"q", Tensor::from_f64({1, 4}, {std::log(3.0), 0, 0, 0})},
                        {"k", Tensor::from_f64({2, 4}, {0, 0, 0, 0, 1, 0, 0, 0})},
                        {"v", Tensor::from_f64({2, 1}, {4, 8})}});
  expect_values(o, {1, 1}, {7}, 1e-14);
}

TEST(Attention, Causal) {
  Rank2 t;
  t.g.output("o", attention(t.q, t.k, t.v).mask(causal_mask()));
  // row i averages v[0..i] of [3, 6, 9]: 3, 4.5, 6
  Tensor o = run1(t.g, {{"q", zeros({3, 1})}, {"k", zeros({3, 1})}, {"v", kV3}});
  expect_values(o, {3, 1}, {3, 4.5, 6}, 1e-14);
}

TEST(Attention, SlidingWindow) {
  Rank2 t;
  t.g.output("o", attention(t.q, t.k, t.v).mask(sliding_window_mask(2)));
  // row 0: v0 = 3; row 1: (3 + 6) / 2; row 2: (6 + 9) / 2
  Tensor o = run1(t.g, {{"q", zeros({3, 1})}, {"k", zeros({3, 1})}, {"v", kV3}});
  expect_values(o, {3, 1}, {3, 4.5, 7.5}, 1e-14);
}

TEST(Attention, FullyMaskedRowGivesZero) {
  Rank2 t;
  t.g.output("o",
             attention(t.q, t.k, t.v).mask([](auto, auto, auto q, auto kv) { return kv > q; }));
  // strictly future keys: row 0 averages 6, 9; row 1 sees 9; row 2 sees nothing -> 0
  Tensor o = run1(t.g, {{"q", zeros({3, 1})}, {"k", zeros({3, 1})}, {"v", kV3}});
  expect_values(o, {3, 1}, {7.5, 9, 0}, 1e-14);
}

TEST(Attention, NoKeysGivesZero) {
  Rank2 t;
  t.g.output("o", attention(t.q, t.k, t.v));
  Tensor o = run1(t.g, {{"q", zeros({2, 1})}, {"k", zeros({0, 1})}, {"v", zeros({0, 1})}});
  expect_values(o, {2, 1}, {0, 0});
}

TEST(Attention, ScoreModComesBeforeTheMask) {
  Rank2 t;
  // The score_mod replaces every score by 0, -inf included: if it ran after the mask it
  // would unmask everything and each row would average all three rows of v.
  t.g.output(
      "o", attention(t.q, t.k, t.v).mask(causal_mask()).score_mod([](auto, auto, auto, auto, auto) {
        return Expr(0.0);
      }));
  Tensor o = run1(t.g, {{"q", zeros({3, 1})}, {"k", zeros({3, 1})}, {"v", kV3}});
  expect_values(o, {3, 1}, {3, 4.5, 6}, 1e-14);
}

TEST(Attention, CrossAttentionWithLNotS) {
  Rank2 t(1, 2);
  t.g.output("o", attention(t.q, t.k, t.v).scale(1.0));
  // L = 2, S = 3, Dv = 2. v columns: [1, 2, 3] and [0, 0, 7]; k = [0, 1, 2].
  //   q0 = 0:    scores 0 -> uniform -> [2, 7/3]
  //   q1 = ln 2: scores [0, ln 2, 2 ln 2] -> weights [1, 2, 4] / 7 ->
  //              [(1 + 4 + 12) / 7, 28 / 7] = [17/7, 4]
  Tensor o = run1(t.g, {{"q", Tensor::from_f64({2, 1}, {0, std::log(2.0)})},
                        {"k", Tensor::from_f64({3, 1}, {0, 1, 2})},
                        {"v", Tensor::from_f64({3, 2}, {1, 0, 2, 0, 3, 7})}});
  expect_values(o, {2, 2}, {2, 7.0 / 3, 17.0 / 7, 4}, 1e-14);
}

TEST(Attention, CausalAlignedToTheEndWithLengths) {
  Rank2 t(1, 2);
  t.g.output("o", attention(t.q, t.k, t.v).scale(1.0).mask([](auto, auto, auto q, auto kv) {
    return kv <= q + len_kv() - len_q();
  }));
  // L = 2, S = 3: query 0 sees kv 0, 1 (uniform, q0 = 0 -> [1.5, 0]); query 1 sees all
  // three, as in the case above -> [17/7, 4].
  Tensor o = run1(t.g, {{"q", Tensor::from_f64({2, 1}, {0, std::log(2.0)})},
                        {"k", Tensor::from_f64({3, 1}, {0, 1, 2})},
                        {"v", Tensor::from_f64({3, 2}, {1, 0, 2, 0, 3, 7})}});
  expect_values(o, {2, 2}, {1.5, 0, 17.0 / 7, 4}, 1e-14);
}

/// (H, L, Dh) queries against (KVH, S, Dh) keys and values.
struct Heads {
  Graph g{"attention"};
  Dim Dh = g.dim("Dh", 1), L = g.dim("L"), S = g.dim("S");
  Dim H, KVH;
  Value q, k, v;
  Heads(std::int64_t h, std::int64_t kvh) : H(g.dim("H", h)), KVH(g.dim("KVH", kvh)) {
    q = g.input("q", DType::F64, {H, L, Dh});
    k = g.input("k", DType::F64, {KVH, S, Dh});
    v = g.input("v", DType::F64, {KVH, S, Dh});
  }
};

TEST(Attention, GroupedQueryHeadMapping) {
  Heads t(4, 2);
  t.g.output("o", attention(t.q, t.k, t.v));
  // One key per kv head: query heads 0, 1 read kv head 0 (v = 10), heads 2, 3 read kv
  // head 1 (v = 20). (h % 2 would give 10, 20, 10, 20.)
  Tensor o = run1(t.g, {{"q", zeros({4, 1, 1})},
                        {"k", zeros({2, 1, 1})},
                        {"v", Tensor::from_f64({2, 1, 1}, {10, 20})}});
  expect_values(o, {4, 1, 1}, {10, 10, 20, 20});
}

TEST(Attention, ModsSeeTheQueryHead) {
  Heads t(4, 2);
  // Query head h keeps only kv position h % 2 of its kv head h / 2. v = [[1, 2], [3, 4]]
  // over (kv head, position) gives 1, 2, 3, 4. Were h the kv head (0, 0, 1, 1), the
  // positions would be 0, 0, 1, 1 and the output 1, 1, 4, 4.
  t.g.output(
      "o", attention(t.q, t.k, t.v).mask([](auto, auto h, auto, auto kv) { return kv == h % 2; }));
  Tensor o = run1(t.g, {{"q", zeros({4, 1, 1})},
                        {"k", zeros({2, 2, 1})},
                        {"v", Tensor::from_f64({2, 2, 1}, {1, 2, 3, 4})}});
  expect_values(o, {4, 1, 1}, {1, 2, 3, 4});
}

TEST(Attention, AlibiSlopesWithMultiQuery) {
  Heads t(2, 1); // MQA: both query heads share one kv head
  Value slopes = t.g.param("slopes", DType::F64, {t.H});
  t.g.output("o", attention(t.q, t.k, t.v).score_mod([&](auto s, auto, auto h, auto q, auto kv) {
    return s + slopes[h] * (kv - q);
  }));
  // Raw scores 0; slopes [ln 2, ln 3]; v = [0, 3].
  //   head 0, q 0: [0, ln 2] -> p [1/3, 2/3] -> 2;  q 1: [-ln 2, 0] -> the same -> 2
  //   head 1, q 0: [0, ln 3] -> p [1/4, 3/4] -> 9/4; q 1: [-ln 3, 0] -> 9/4
  Tensor o = run1(t.g, {{"q", zeros({2, 2, 1})},
                        {"k", zeros({1, 2, 1})},
                        {"v", Tensor::from_f64({1, 2, 1}, {0, 3})},
                        {"slopes", Tensor::from_f64({2}, {std::log(2.0), std::log(3.0)})}});
  expect_values(o, {2, 2, 1}, {2, 2, 2.25, 2.25}, 1e-14);
}

TEST(Attention, AlibiWithCausalMask) {
  Heads t(2, 1);
  Value slopes = t.g.param("slopes", DType::F64, {t.H});
  t.g.output("o", attention(t.q, t.k, t.v)
                      .mask(causal_mask())
                      .score_mod([&](auto s, auto, auto h, auto q, auto kv) {
                        return s + slopes[h] * (kv - q);
                      }));
  // As above, but query 0 sees only kv 0 (v = 0): [0, 2 | 0, 9/4].
  Tensor o = run1(t.g, {{"q", zeros({2, 2, 1})},
                        {"k", zeros({1, 2, 1})},
                        {"v", Tensor::from_f64({1, 2, 1}, {0, 3})},
                        {"slopes", Tensor::from_f64({2}, {std::log(2.0), std::log(3.0)})}});
  expect_values(o, {2, 2, 1}, {0, 2, 0, 2.25}, 1e-14);
}

TEST(Attention, DocumentMaskFromAnI32Table) {
  Rank2 t;
  Dim S = t.g.dim("S");
  Value doc = t.g.input("doc", DType::I32, {S});
  t.g.output("o", attention(t.q, t.k, t.v).mask([&](auto, auto, auto q, auto kv) {
    return doc[q] == doc[kv];
  }));
  // doc = [0, 0, 1, 1]: tokens 0, 1 average v 1, 2; tokens 2, 3 average 3, 4.
  Tensor o = run1(t.g, {{"q", zeros({4, 1})},
                        {"k", zeros({4, 1})},
                        {"v", Tensor::from_f64({4, 1}, {1, 2, 3, 4})},
                        {"doc", Tensor::from_i32({4}, {0, 0, 1, 1})}});
  expect_values(o, {4, 1}, {1.5, 1.5, 3.5, 3.5}, 1e-14);
}

TEST(Attention, BatchIndexReachesTheMods) {
  Graph g("attention");
  Dim B = g.dim("B"), H = g.dim("H", 1), L = g.dim("L"), S = g.dim("S"), Dh = g.dim("Dh", 1);
  Value q = g.input("q", DType::F64, {B, H, L, Dh});
  Value k = g.input("k", DType::F64, {B, H, S, Dh});
  Value v = g.input("v", DType::F64, {B, H, S, Dh});
  g.output("o", attention(q, k, v).mask([](auto b, auto, auto, auto kv) { return kv == b; }));
  // batch b keeps only kv position b: batch 0 -> v[0][0][0] = 1, batch 1 -> v[1][0][1] = 4
  Tensor o = run1(g, {{"q", zeros({2, 1, 1, 1})},
                      {"k", zeros({2, 1, 2, 1})},
                      {"v", Tensor::from_f64({2, 1, 2, 1}, {1, 2, 3, 4})}});
  expect_values(o, {2, 1, 1, 1}, {1, 4});
}

TEST(Attention, MatchesTheUnfusedOps) {
  // attention == matmul(softmax(mask(score_mod(scale * q.k^T))), v) built from the
  // separate ops, on random data with heads and a batch.
  Graph g("attention");
  Dim B = g.dim("B"), H = g.dim("H", 2), L = g.dim("L"), Dh = g.dim("Dh", 3);
  Value q = g.input("q", DType::F64, {B, H, L, Dh});
  Value k = g.input("k", DType::F64, {B, H, L, Dh});
  Value v = g.input("v", DType::F64, {B, H, L, Dh});
  auto soft = [](auto s, auto, auto h, auto, auto) { return s * (h + 1); };
  g.output("fused", attention(q, k, v).scale(0.5).mask(causal_mask()).score_mod(soft));
  Value s = mask(score_mod(scale(matmul(q, transpose(k)), 0.5), soft), causal_mask());
  g.output("unfused", matmul(softmax(s), v));
  TensorMap in{{"q", Tensor::random(DType::F64, {2, 2, 5, 3}, 1)},
               {"k", Tensor::random(DType::F64, {2, 2, 5, 3}, 2)},
               {"v", Tensor::random(DType::F64, {2, 2, 5, 3}, 3)}};
  TensorMap out = reference::run(g, in);
  // Same arithmetic in a different order: agreement to rounding.
  assert_close(out.at("fused"), out.at("unfused"), 1e-14, 1e-13, "fused attention");
}

} // namespace
} // namespace qkv
