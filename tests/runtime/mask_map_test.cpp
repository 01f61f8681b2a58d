// reference::mask_map and kept_pairs (a mask evaluated at every pair, as `qkv show` and
// the benchmarks' flop counts use it), and wrong mods: each is reported with the mod, the
// tensor and the position.
#include <gtest/gtest.h>

#include <qkv/qkv.hpp>
#include <qkv_test/errors.hpp>

namespace qkv::test {
namespace {

constexpr auto B = dim<"B">;
constexpr auto L = dim<"L">;
constexpr auto S = dim<"S">;
constexpr auto H = dim<"H", 2>;
constexpr auto Dh = dim<"Dh", 4>;

TEST(MaskMap, CausalKeepsTheLowerTriangle) {
  Graph g("causal");
  auto q = g.input<f32>("q", B, H, L, Dh);
  g.output("o", attention(q, q, q).mask(causal_mask()).value());
  TensorMap in = random_inputs(g, {{"B", 2}, {"L", 5}}, 1);
  NodeId att = g.outputs().front().second;
  reference::MaskMap m = reference::mask_map(g, in, att, 1, 1);
  ASSERT_EQ(m.len_q, 5);
  ASSERT_EQ(m.len_kv, 5);
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 5; ++j)
      EXPECT_EQ(m.at(i, j), j <= i) << i << ", " << j;
  EXPECT_EQ(m.kept(), 15);
  EXPECT_EQ(reference::kept_pairs(g, in, att), 15 * 2 * 2); // B * H of them
}

TEST(MaskMap, NoMaskKeepsEverythingAndCrossLengthsCount) {
  Graph g("cross");
  auto q = g.input<f32>("q", B, H, L, Dh);
  auto k = g.input<f32>("k", B, H, S, Dh);
  g.output("o", attention(q, k, k).value());
  TensorMap in = random_inputs(g, {{"B", 1}, {"L", 3}, {"S", 7}}, 1);
  reference::MaskMap m = reference::mask_map(g, in, g.outputs().front().second, 0, 0);
  EXPECT_EQ(m.len_q, 3);
  EXPECT_EQ(m.len_kv, 7);
  EXPECT_EQ(m.kept(), 21);
}

// Captured tensors are computed from the inputs first; masks that read b or h are
// evaluated per batch and head.
TEST(MaskMap, CapturesAndPerHeadMasks) {
  Graph g("docs");
  auto q = g.input<f32>("q", B, H, L, Dh);
  auto doc = g.input<i32>("doc", B, L);
  auto o = attention(q, q, q).mask([&](auto b, auto h, auto qi, auto ki) {
    return doc(b, qi) == doc(b, ki) && (h == 0 || qi >= ki);
  });
  g.output("o", o.value());
  TensorMap in = random_inputs(g, {{"B", 2}, {"L", 4}}, 1);
  in["doc"] = Tensor::from_i32({2, 4}, {0, 0, 1, 1, 0, 0, 0, 0});
  NodeId att = g.outputs().front().second;
  EXPECT_EQ(reference::mask_map(g, in, att, 0, 0).kept(), 8);  // two blocks of 2x2
  EXPECT_EQ(reference::mask_map(g, in, att, 0, 1).kept(), 6);  // their lower triangles
  EXPECT_EQ(reference::mask_map(g, in, att, 1, 0).kept(), 16); // one document
  EXPECT_EQ(reference::mask_map(g, in, att, 1, 1).kept(), 10);
  EXPECT_EQ(reference::kept_pairs(g, in, att), 8 + 6 + 16 + 10);
}

TEST(MaskMap, Errors) {
  Graph g("g");
  auto q = g.input<f32>("q", B, H, L, Dh);
  auto x = gelu(q).named("act");
  g.output("o", attention(x, q, q).mask(causal_mask()).value());
  TensorMap in = random_inputs(g, {{"B", 1}, {"L", 3}}, 1);
  EXPECT_EQ(error_of([&] { reference::mask_map(g, in, x.value().id(), 0, 0); }),
            "mask_map: node 'act' of graph 'g' is a gelu, not an attention or a mask");
  EXPECT_NE(error_of([&] {
              reference::mask_map(g, in, g.outputs().front().second, 0, 2);
            }).find("(b=0, h=2) is outside node"),
            std::string::npos);
}

// ---- wrong mods -------------------------------------------------------------------------

// A load past a captured tensor's end: the interpreter names the op, the mod, the tensor,
// the index, the dim and the position. (A checked compile reports the same load with
// the same words: tests/compiler/checked_test.cpp.)
TEST(WrongMods, OutOfRangeCapturedReadIsNamed) {
  Graph g("rel");
  auto q = g.input<f32>("q", B, H, L, Dh);
  auto table = g.param<f32>("rel_bias", H, dim<"R", 4>);
  auto o = attention(q, q, q).named("att").score_mod([&](auto s, auto b, auto h, auto qi, auto ki) {
    return s + table(h, ki - qi + 3); // meant for |kv - q| <= 3
  });
  g.output("o", o.value());
  EXPECT_NO_THROW(reference::run(g, random_inputs(g, {{"B", 1}, {"L", 1}}, 1)));
  EXPECT_EQ(error_of([&] {
              reference::run(g, random_inputs(g, {{"B", 1}, {"L", 2}}, 1));
            }),
            "attention 'att': score_mod loads 'rel_bias'[0, 4] out of bounds: index 4 on dim "
            "'R'(4) of 'rel_bias' [2, 4], in `rel_bias[h, kv - q + 3]` at (b=0, h=0, q=0, kv=1)");
}

TEST(WrongMods, OutOfRangeReadInAMaskIsNamedToo) {
  Graph g("docs");
  auto q = g.input<f32>("q", B, H, L, Dh);
  auto k = g.input<f32>("k", B, H, S, Dh);
  auto doc = g.input<i32>("doc", B, L); // indexed by kv below, but kv runs over S
  auto o = attention(q, k, k).named("att").mask(
      [&](auto b, auto h, auto qi, auto ki) { return doc(b, qi) == doc(b, ki); });
  g.output("o", o.value());
  TensorMap in = random_inputs(g, {{"B", 1}, {"L", 2}, {"S", 3}}, 1);
  std::string e = error_of([&] { reference::run(g, in); });
  EXPECT_NE(e.find("attention 'att': mask_mod loads 'doc'[0, 2] out of bounds"), std::string::npos)
      << e;
  EXPECT_EQ(error_of([&] { reference::kept_pairs(g, in, g.outputs().front().second); }), e);
}

// A score_mod returning a condition does not compile with a lambda
// (tests/compile_fail/score_mod_returns_condition.cpp); built by hand, it is refused.
TEST(WrongMods, ScoreModReturningAConditionIsRefused) {
  Graph g("g");
  Value q = g.input("q", DType::F32, {Dim("L"), Dim("Dh", 4)});
  BoolExpr cond = detail::index_var(ExprOp::IndexQ) >= detail::index_var(ExprOp::IndexKV);
  EXPECT_EQ(error_of([&] { attention(q, q, q).score_mod(ScoreFn{cond.ptr()}); }),
            "attention: score_mod must be a number, got the condition q >= kv");
}

// Indexing with a float does not compile in the typed DSL
// (tests/compile_fail/load_float_index.cpp); the untyped API refuses it while tracing,
// naming the mod and the tensor.
TEST(WrongMods, FloatIndexIsRefusedWhileTracing) {
  Graph g("g");
  Value q = g.input("q", DType::F32, {Dim("H", 2), Dim("L"), Dim("Dh", 4)});
  Value table = g.param("rel_bias", DType::F32, {Dim("H", 2), Dim("R", 9)});
  EXPECT_EQ(error_of([&] {
              attention(q, q, q).score_mod([&](Expr s, Expr, Expr h, Expr qi, Expr ki) {
                return s + table(h, (ki - qi) * 0.5);
              });
            }),
            "score_mod: index 1 of 'rel_bias' (H, R) is the float `float(kv - q) * 0.5`; tensor "
            "indices must be integers (positions, integer constants, loads from integer tensors "
            "and integer arithmetic on them)");
  Value slopes = g.param("slopes", DType::F32, {Dim("H", 2)});
  std::string e = error_of([&] {
    attention(q, q, q).mask([&](Expr, Expr h, Expr, Expr) { return slopes[to_float(h)] > 0.0; });
  });
  EXPECT_EQ(e.rfind("mask_mod: index 0 of 'slopes' (H) is the float `float(h)`", 0), 0u) << e;
}

} // namespace
} // namespace qkv::test
