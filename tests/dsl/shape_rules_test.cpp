// Every shape rule of the untyped Graph (infer_type and the builders), broken once, and
// what the user reads: the op, the tensors and the dims in the 'Dh'(64) form.
#include <qkv/dsl/graph.hpp>
#include <qkv/dsl/infer.hpp>
#include <qkv/dsl/op_table.hpp>
#include <qkv/dsl/shape_rules.hpp>

#include <gtest/gtest.h>

#include "qkv_test/errors.hpp"

#include <cmath>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>

namespace {

using namespace qkv;
using qkv::test::error_of;
using qkv::test::ErrorSays;

class ShapeRules : public testing::Test {
protected:
  Graph g{"g"};
  Dim B{"B"}, C{"C"}, L{"L"}, S{"S"}, E{"E"};
  Dim K{"K", 16}, N{"N", 32}, D{"D", 512}, H{"H", 8}, Hkv{"Hkv", 2}, Dh{"Dh", 64};

  Value in(const std::string &name, std::vector<Dim> dims, DType t = DType::F32) {
    return g.input(name, t, dims);
  }
};

// ---- matmul ------------------------------------------------------------------------------

TEST_F(ShapeRules, MatmulContractionDimsDiffer) {
  Value q = in("q", {L, Dh}), k = in("k", {D, S});
  EXPECT_EQ(error_of([&] { matmul(q, k); }),
            "matmul: contraction dims differ: 'q' (L, Dh) has 'Dh'(64) last, 'k' (D, S) has "
            "'D'(512) second to last");
}

TEST_F(ShapeRules, MatmulBatchDimsDiffer) {
  Value a = in("a", {B, L, K}), b = in("b", {C, K, N});
  EXPECT_TRUE(
      ErrorSays([&] { matmul(a, b); }, {"matmul: batch dims differ", "'a' (B, L, K) has (B)",
                                        "'b' (C, K, N) has (C)", "or one side must be 2-D"}));
}

TEST_F(ShapeRules, MatmulTwoDimSideBroadcasts) {
  Value a = in("a", {B, L, K}), w = in("w", {K, N}), w2 = in("w2", {S, L});
  EXPECT_EQ(matmul(a, w).dims(), (std::vector<Dim>{B, L, N}));
  EXPECT_EQ(matmul(w2, a).dims(), (std::vector<Dim>{B, S, K}));
}

TEST_F(ShapeRules, MatmulNeedsTwoDims) {
  Value a = in("a", {K}), b = in("b", {K, N});
  EXPECT_EQ(error_of([&] { matmul(a, b); }),
            "matmul: 'a' (K) has 1 dims; matmul needs at least 2 (rows, cols)");
  EXPECT_TRUE(ErrorSays([&] { matmul(b, a); }, {"'a' (K) has 1 dims"}));
}

// The rules of a tensor's number of dims are those whose sentence is about the tensor's
// dims; their errors add how many dims the tensor has.
// A new rank rule missing from shape::is_rank_rule fails here.
TEST(ShapeRuleKinds, RankRulesAreThoseAboutTheTensorsDims) {
  for (int i = 0; i <= static_cast<int>(shape::Rule::last); ++i) {
    auto r = static_cast<shape::Rule>(i);
    std::string_view s = shape::summary(r);
    bool about_dims =
        (s.starts_with("the tensor needs at least") || s.starts_with("the tensor must have")) &&
        s.find(" dim") != std::string_view::npos;
    EXPECT_EQ(shape::is_rank_rule(r), about_dims) << "rule " << i << ": " << s;
  }
}

TEST_F(ShapeRules, MatmulNeedsFloatAndOneDtype) {
  Value ids = in("ids", {L, K}, DType::I32), a = in("a", {L, K}), b = in("b", {K, N}, DType::F64);
  EXPECT_EQ(error_of([&] { matmul(ids, b); }),
            "matmul: 'ids' (L, K) is i32; it needs a float tensor");
  EXPECT_EQ(error_of([&] { matmul(a, b); }),
            "matmul: dtypes differ: 'a' (L, K) is f32, 'b' (K, N) is f64");
}

// ---- linear ------------------------------------------------------------------------------

TEST_F(ShapeRules, LinearInputDimIsNotTheWeightsFirst) {
  // The classic mix-up: q ends in Dh, wk starts with D.
  Value q = in("q", {L, Dh}), wk = in("wk", {D, Dh});
  EXPECT_EQ(error_of([&] { linear(q, wk); }),
            "linear: 'q' (L, Dh) ends in 'Dh'(64) but weight 'wk' (D, Dh) starts with 'D'(512) "
            "(the input dim must be the weight's first dim)");
}

TEST_F(ShapeRules, LinearWeightHasTwoDims) {
  Value x = in("x", {L, K}), w = in("w", {C, K, N});
  EXPECT_EQ(error_of([&] { linear(x, w); }),
            "linear: weight 'w' (C, K, N) must have 2 dims (in, out)");
}

TEST_F(ShapeRules, LinearInputNeedsADim) {
  Value s = in("s", {}), w = in("w", {K, N});
  EXPECT_TRUE(ErrorSays([&] { linear(s, w); }, {"linear: 's' () has 0 dims"}));
}

TEST_F(ShapeRules, LinearBiasIsTheWeightsOutDim) {
  Value x = in("x", {L, K}), w = in("w", {K, N}), b = in("b", {K}), b2 = in("b2", {L, N});
  EXPECT_EQ(error_of([&] { linear(x, w, b); }),
            "linear: bias 'b' (K) must be (N), the weight's output dim 'N'(32)");
  EXPECT_TRUE(ErrorSays([&] { linear(x, w, b2); }, {"bias 'b2' (L, N) must be (N)"}));
  Value b64 = in("b64", {N}, DType::F64);
  EXPECT_TRUE(ErrorSays([&] { linear(x, w, b64); }, {"linear: dtypes differ", "'b64' (N) is f64"}));
}

TEST_F(ShapeRules, LinearNeedsFloatAndOneDtype) {
  Value ids = in("ids", {L, K}, DType::I64), w = in("w", {K, N}),
        w64 = in("w64", {K, N}, DType::F64);
  Value x = in("x", {L, K});
  EXPECT_TRUE(ErrorSays([&] { linear(ids, w); }, {"linear: 'ids' (L, K) is i64"}));
  EXPECT_TRUE(ErrorSays([&] { linear(x, w64); }, {"linear: dtypes differ", "'w64' (K, N) is f64"}));
}

// ---- transpose, softmax ------------------------------------------------------------------

TEST_F(ShapeRules, TransposeAxisOutOfRange) {
  Value x = in("x", {B, L, D});
  EXPECT_EQ(error_of([&] { transpose(x, 0, 3); }),
            "transpose of 'x': axis 3 is out of range for 3 dims");
  EXPECT_TRUE(ErrorSays([&] { transpose(x, -4, 0); }, {"axis -4 is out of range for 3 dims"}));
  EXPECT_EQ(transpose(x, -3, -1).dims(), (std::vector<Dim>{D, L, B}));
}

TEST_F(ShapeRules, TransposeByNameUnknownOrRepeated) {
  Value x = in("x", {B, L, D}), s = in("s", {L, L});
  EXPECT_EQ(error_of([&] { transpose(x, "L", "Q"); }), "transpose: 'x' (B, L, D) has no dim 'Q'");
  EXPECT_EQ(error_of([&] { transpose(s, "L", "L"); }),
            "transpose: dim 'L' appears twice in 's' (L, L); pass an axis number instead");
  EXPECT_EQ(transpose(x, "B", "D").dims(), (std::vector<Dim>{D, L, B}));
}

TEST_F(ShapeRules, SoftmaxAxisAndName) {
  Value x = in("x", {L, S}), sq = in("sq", {L, L}), ids = in("ids", {L}, DType::I32);
  EXPECT_EQ(error_of([&] { softmax(x, 2); }), "softmax of 'x': axis 2 is out of range for 2 dims");
  EXPECT_EQ(error_of([&] { softmax(x, "D"); }), "softmax: 'x' (L, S) has no dim 'D'");
  EXPECT_TRUE(
      ErrorSays([&] { softmax(sq, "L"); }, {"softmax: dim 'L' appears twice in 'sq' (L, L)"}));
  EXPECT_EQ(error_of([&] { softmax(ids); }), "softmax: 'ids' (L) is i32; it needs a float tensor");
  EXPECT_EQ(softmax(x, "L").node().attrs.axes, (std::vector<std::int64_t>{0}));
}

// ---- unary float ops ---------------------------------------------------------------------

TEST_F(ShapeRules, UnaryOpsNeedFloat) {
  Value ids = in("ids", {L}, DType::I32);
  EXPECT_EQ(error_of([&] { scale(ids, 2.0); }), "scale: 'ids' (L) is i32; it needs a float tensor");
  EXPECT_TRUE(ErrorSays([&] { gelu(ids); }, {"gelu: 'ids' (L) is i32"}));
  EXPECT_TRUE(ErrorSays([&] { silu(ids); }, {"silu: 'ids' (L) is i32"}));
  EXPECT_TRUE(ErrorSays([&] { elu(ids); }, {"elu: 'ids' (L) is i32"}));
  EXPECT_TRUE(ErrorSays([&] { sinusoidal_pe(ids); }, {"sinusoidal_pe: 'ids' (L) is i32"}));
}

// The compiled data-movement ops take float tensors: an integer one is refused when the
// graph is built, not by an internal error when it is compiled.
TEST_F(ShapeRules, DataMovementNeedsFloat) {
  Value ids = in("ids", {L, S}, DType::I64), ids3 = in("ids3", {B, L, S}, DType::I32);
  EXPECT_EQ(error_of([&] { transpose(ids); }),
            "transpose: 'ids' (L, S) is i64; it needs a float tensor");
  EXPECT_TRUE(ErrorSays([&] { concat({ids, ids}, 0); }, {"concat: 'ids' (L, S) is i64"}));
  EXPECT_TRUE(ErrorSays([&] { merge_heads(ids3); }, {"merge_heads: 'ids3' (B, L, S) is i32"}));
}

TEST_F(ShapeRules, SinusoidalPENeedsTwoDimsAndSaneOptions) {
  Value v = in("v", {D}), x = in("x", {L, D});
  EXPECT_EQ(error_of([&] { sinusoidal_pe(v); }),
            "sinusoidal_pe: 'v' (D) has 1 dims; it adds positions over the last two (position, "
            "feature)");
  EXPECT_TRUE(ErrorSays([&] { sinusoidal_pe(x, 0.0); }, {"sinusoidal_pe: base must be positive"}));
  EXPECT_TRUE(ErrorSays([&] { sinusoidal_pe(x, 10000, -1); }, {"offset must not be negative"}));
}

// ---- elementwise -------------------------------------------------------------------------

TEST_F(ShapeRules, ElementwiseShorterMustEndTheLonger) {
  Value a = in("a", {B, L, K}), c = in("c", {L, N}), bias = in("bias", {K}), kl = in("kl", {K, L});
  EXPECT_EQ(error_of([&] { add(a, c); }),
            "add: shapes do not match: 'a' (B, L, K) and 'c' (L, N) (they must be equal, or the "
            "shorter must end the longer)");
  EXPECT_TRUE(
      ErrorSays([&] { sub(c, a); }, {"sub: shapes do not match", "'c' (L, N)", "'a' (B, L, K)"}));
  EXPECT_TRUE(ErrorSays([&] { mul(a, kl); }, {"mul: shapes do not match"}));
  EXPECT_TRUE(ErrorSays([&] { div(kl, a); }, {"div: shapes do not match"}));
  EXPECT_EQ((bias + a).dims(), (std::vector<Dim>{B, L, K}));
  EXPECT_EQ((a * bias).dims(), (std::vector<Dim>{B, L, K}));
}

TEST_F(ShapeRules, ElementwiseNeedsFloatAndOneDtype) {
  Value a = in("a", {L}), ids = in("ids", {L}, DType::I32), d = in("d", {L}, DType::F64);
  EXPECT_TRUE(ErrorSays([&] { add(ids, a); }, {"add: 'ids' (L) is i32"}));
  EXPECT_EQ(error_of([&] { a *d; }), "mul: dtypes differ: 'a' (L) is f32, 'd' (L) is f64");
}

TEST_F(ShapeRules, ResidualNeedsTheSameDims) {
  Value x = in("x", {L, D}), bias = in("bias", {D});
  EXPECT_EQ(error_of([&] { residual(x, bias); }),
            "residual: 'x' (L, D) and 'bias' (D) must have exactly the same dims");
}

// ---- heads -------------------------------------------------------------------------------

TEST_F(ShapeRules, SplitHeadsLastDimMustBeHeadsTimesHeadDim) {
  Value x = in("x", {L, D});
  EXPECT_EQ(error_of([&] { split_heads(x, H, Dim("Dh", 32)); }),
            "split_heads: 'x' (L, D) ends in 'D'(512), which cannot split into 'H'(8) heads of "
            "'Dh'(32) (256 != 512)");
  EXPECT_EQ(split_heads(x, H, Dh).dims(), (std::vector<Dim>{H, L, Dh}));
}

TEST_F(ShapeRules, SplitHeadsDynamicLastDimNeedsTheProductName) {
  Value x = in("x", {L, E});
  EXPECT_EQ(error_of([&] { split_heads(x, H, Dim("F")); }),
            "split_heads: 'x' (L, E) ends in 'E'(dynamic), which is dynamic; split_heads needs a "
            "static last dim (or one named H*F)");
  Value y = in("y", {L, product(H, Dim("F"))});
  EXPECT_EQ(split_heads(y, H, Dim("F")).dims(), (std::vector<Dim>{H, L, Dim("F")}));
}

// A static dim named like the product still needs the product's extent: 'P*Q'(8), made of
// 2 x 4, does not split into 2 heads of 3 (the rules once matched it by its name alone).
TEST_F(ShapeRules, DerivedDimsOfAnotherStaticExtentDoNotMatchByName) {
  Dim P("P", 2), Q("Q", 4);
  Value x = in("x", {L, product(P, Q)}), o = in("o", {H, L, Dh}), a = in("a", {L, K}),
        d = in("d", {L, N});
  EXPECT_EQ(error_of([&] { split_heads(x, P, Dim("Q", 3)); }),
            "split_heads: 'x' (L, P*Q) ends in 'P*Q'(8), which cannot split into 'P'(2) heads of "
            "'Q'(3) (6 != 8)");
  EXPECT_EQ(error_of([&] { merge_heads(o, Dim("H*Dh", 256)); }),
            "merge_heads: 'o' (H, L, Dh) merges 'H'(8) heads of 'Dh'(64) into 512 features, which "
            "is not 'H*Dh'(256)");
  EXPECT_EQ(error_of([&] {
              concat({a, d}, 1, Dim("K+N", 40));
            }),
            "concat: the parts add up to 'K+N'(48), which is not 'K+N'(40)");
  EXPECT_EQ(split_heads(x, P, Q).dims(), (std::vector<Dim>{P, L, Q}));
}

TEST_F(ShapeRules, SplitHeadsHeadsStaticAndRank) {
  Value x = in("x", {L, D}), v = in("v", {D});
  EXPECT_EQ(error_of([&] { split_heads(x, Dim("G"), Dh); }),
            "split_heads: the heads dim 'G'(dynamic) must be static and positive");
  EXPECT_EQ(error_of([&] { split_heads(v, H, Dh); }),
            "split_heads: 'v' (D) has 1 dims; split_heads needs (..., L, H*Dh)");
}

// A failed op must leave the graph's dims as they were: the failed split above once left
// 'Dh'(32) registered, and a later, valid input with 'Dh'(64) was refused because of it.
TEST_F(ShapeRules, AFailedOpLeavesNoDimsBehind) {
  Value x = in("x", {L, D});
  EXPECT_THROW(split_heads(x, H, Dim("Dh", 32)), Error);
  EXPECT_EQ(g.dim_defs().count("Dh"), 0u);
  EXPECT_NO_THROW(in("y", {Dim("Dh", 64)}));

  Value o = in("o", {H, L, Dh});
  EXPECT_THROW(merge_heads(o, Dim("M", 100)), Error);
  EXPECT_EQ(g.dim_defs().count("M"), 0u);
  EXPECT_THROW(concat({x, x}, 0, Dim("LL", 7)), Error);
  EXPECT_EQ(g.dim_defs().count("LL"), 0u);
}

TEST_F(ShapeRules, AFailedInputLeavesNoDimsBehind) {
  in("x", {D});
  EXPECT_TRUE(ErrorSays(
      [&] {
        in("y", {Dim("A", 3), Dim("D", 256)});
      },
      {"input 'y': dim 'D' is 'D'(512) elsewhere in graph 'g' but 'D'(256) here"}));
  EXPECT_EQ(g.dim_defs().count("A"), 0u);
  EXPECT_TRUE(ErrorSays(
      [&] {
        in("z", {Dim("P", 3), Dim("P", 4)});
      },
      {"dim 'P' is 'P'(3) elsewhere", "'P'(4) here"}));
  EXPECT_EQ(g.dim_defs().count("P"), 0u);
  EXPECT_NO_THROW(in("w", {Dim("A", 5), Dim("P", 4)}));
}

TEST_F(ShapeRules, MergeHeadsRankAndOut) {
  Value x = in("x", {L, D}), o = in("o", {H, L, Dh});
  EXPECT_EQ(error_of([&] { merge_heads(x); }),
            "merge_heads: 'x' (L, D) has 2 dims; merge_heads needs (..., H, L, Dh)");
  EXPECT_EQ(error_of([&] { merge_heads(o, Dim("M", 256)); }),
            "merge_heads: 'o' (H, L, Dh) merges 'H'(8) heads of 'Dh'(64) into 512 features, which "
            "is not 'M'(256)");
  EXPECT_EQ(merge_heads(o).dims(), (std::vector<Dim>{L, product(H, Dh)}));
  EXPECT_EQ(merge_heads(o, D).dims(), (std::vector<Dim>{L, D}));
}

TEST_F(ShapeRules, MergeHeadsOutByNameWhenDynamic) {
  Value o = in("o", {H, L, E});
  EXPECT_TRUE(ErrorSays([&] { merge_heads(o, Dim("M")); },
                        {"merges 'H'(8) heads of 'E'(dynamic) into H*E features, which is not "
                         "'M'(dynamic)"}));
  EXPECT_EQ(merge_heads(o, product(H, E)).dims(), (std::vector<Dim>{L, product(H, E)}));
}

// ---- concat ------------------------------------------------------------------------------

TEST_F(ShapeRules, ConcatRules) {
  Value a = in("a", {L, K}), b = in("b", {S, N}), c = in("c", {K}), d = in("d", {L, N});
  Value a64 = in("a64", {L, N}, DType::F64);
  EXPECT_EQ(error_of([&] { concat({}); }), "concat: needs at least one tensor");
  EXPECT_EQ(error_of([&] {
              concat({a, c});
            }),
            "concat: 'a' (L, K) and 'c' (K) have different numbers of dims");
  EXPECT_EQ(error_of([&] {
              concat({a, b}, 1);
            }),
            "concat: along axis 1, the other dims must match: 'a' (L, K) has 'L'(dynamic), 'b' "
            "(S, N) has 'S'(dynamic)");
  EXPECT_EQ(error_of([&] {
              concat({a, d}, 1, Dim("X", 40));
            }),
            "concat: the parts add up to 'K+N'(48), which is not 'X'(40)");
  EXPECT_TRUE(ErrorSays(
      [&] {
        concat({a, a64});
      },
      {"concat: dtypes differ", "'a64' (L, N) is f64"}));
  EXPECT_TRUE(ErrorSays([&] { concat({a, d}, 2); }, {"concat of 'a': axis 2 is out of range"}));
  EXPECT_EQ(concat({a, d}).dims(), (std::vector<Dim>{L, Dim("K+N", 48)}));
  EXPECT_EQ(concat({a, d}, -1, Dim("X", 48)).dims(), (std::vector<Dim>{L, Dim("X", 48)}));
}

// ---- mask and score_mod ------------------------------------------------------------------

TEST_F(ShapeRules, MaskScoresRankAndDtype) {
  Value v = in("v", {S}), ids = in("ids", {L, S}, DType::I32);
  EXPECT_EQ(error_of([&] { mask(v, causal_mask()); }),
            "mask: scores 'v' (S) must have 2 (L, S), 3 (H, L, S) or 4 (B, H, L, S) dims");
  EXPECT_TRUE(ErrorSays([&] { score_mod(v, [](Expr s, Expr, Expr, Expr, Expr) { return s; }); },
                        {"score_mod: scores 'v' (S) must have 2"}));
  EXPECT_TRUE(ErrorSays([&] { mask(ids, causal_mask()); }, {"mask: 'ids' (L, S) is i32"}));
}

TEST_F(ShapeRules, ModTypesAreChecked) {
  Value s = in("s", {L, S});
  Expr qi = detail::index_var(ExprOp::IndexQ), ki = detail::index_var(ExprOp::IndexKV);
  // The C++ types stop these in lambdas; a MaskFn/ScoreFn built by hand reaches infer_type.
  EXPECT_EQ(error_of([&] { mask(s, MaskFn{(qi + 1).ptr()}); }),
            "mask: mask_mod must be a condition, got q + 1");
  EXPECT_EQ(error_of([&] { score_mod(s, ScoreFn{(qi >= ki).ptr()}); }),
            "score_mod: score_mod must be a number, got the condition q >= kv");
  Expr score = detail::index_var(ExprOp::Score);
  EXPECT_EQ(error_of([&] { mask(s, MaskFn{(score > 0.0).ptr()}); }),
            "mask: mask_mod cannot use the score (use a score_mod)");
  EXPECT_EQ(error_of([&] { mask(s, MaskFn{}); }), "mask: empty mask_mod");
  EXPECT_EQ(error_of([&] { score_mod(s, ScoreFn{}); }), "score_mod: empty score_mod");
}

TEST_F(ShapeRules, ModLoadsAreChecked) {
  Value s = in("s", {H, L, S}), slopes = in("slopes", {H});
  Expr h = detail::index_var(ExprOp::IndexH);
  EXPECT_EQ(error_of([&] { slopes(h, h); }),
            "mod expression: 'slopes' (H) has 1 dims but is indexed with 2");
  // A load built below Value::load (as a deserialiser might) is checked again by the op.
  Expr bad(detail::make_load(&g, slopes.id(), DType::F32, {h.ptr(), h.ptr()}));
  EXPECT_EQ(
      error_of([&] { score_mod(s, ScoreFn{(detail::index_var(ExprOp::Score) + bad).ptr()}); }),
      "score_mod: score_mod indexes 'slopes' (H) with 2 indices; it has 1 dims");
  Graph other("other");
  Value t = other.input("t", DType::F32, {H});
  EXPECT_EQ(error_of([&] { mask(s, [&](Expr, Expr hh, Expr, Expr) { return t[hh] > 0.0; }); }),
            "mask: a mod loads from a tensor of another graph");
  // A mask load of a float tensor is fine; the value is captured as an input.
  Value m = mask(s, [&](Expr, Expr hh, Expr, Expr) { return slopes[hh] > 0.0; });
  EXPECT_EQ(m.node().inputs, (std::vector<NodeId>{s.id(), slopes.id()}));
}

// A float constant past f32's range: the compiled kernel's f32 mod would see -inf (every
// score masked, output 0) and the interpreter's double mod a finite shift (the mean of v).
// Refused when the op is built, naming the mod, the constant and the expression; in an
// f64 op it is an ordinary number, and infinities are what they say.
TEST_F(ShapeRules, ModConstantsOutsideF32sRangeAreRefused) {
  Value x = in("x", {H, L, Dh}), slopes = in("slopes", {H});
  EXPECT_EQ(error_of([&] {
              attention(x, x, x).score_mod(
                  [&](Expr s, Expr, Expr hh, Expr, Expr) { return s * slopes[hh] - 1e39; });
            }),
            "attention: score_mod constant 1e+39 is outside f32's range (|x| <= 3.4e+38): "
            "compiled kernels evaluate the score_mod of a f32 op in f32, where it would be inf "
            "(the interpreter computes in double); in `score * slopes[h] - 1e+39`");
  Value s = in("s", {L, S}), half = in("half", {L, S}, DType::BF16);
  EXPECT_TRUE(ErrorSays([&] { score_mod(half, [](Expr sc, Expr, Expr, Expr, Expr) { return sc + -4e38; }); },
                        {"score_mod: score_mod constant -4e+38 is outside f32's range",
                         "a bf16 op in f32, where it would be -inf"}));
  EXPECT_TRUE(ErrorSays(
      [&] { mask(s, [](Expr, Expr, Expr qi, Expr) { return to_float(qi) < 1e300; }); },
      {"mask: mask_mod constant 1e+300"}));
  // The constant is spelled as the expression spells it: every digit it needs.
  EXPECT_TRUE(ErrorSays(
      [&] { mask(s, [](Expr, Expr, Expr qi, Expr) { return to_float(qi) < 1.2345678901e39; }); },
      {"mask: mask_mod constant 1.2345678901e+39 is outside",
       "in `float(q) < 1.2345678901e+39`"}));
  EXPECT_NO_THROW(mask(s, [](Expr, Expr, Expr qi, Expr) { return to_float(qi) < 3e38; }));
  EXPECT_NO_THROW(score_mod(s, [](Expr sc, Expr, Expr, Expr, Expr) {
    return max(sc, -std::numeric_limits<double>::infinity());
  }));
  Value s64 = in("s64", {L, S}, DType::F64);
  EXPECT_NO_THROW(score_mod(s64, [](Expr sc, Expr, Expr, Expr, Expr) { return sc - 1e39; }));
}

// ---- rope, norms, swiglu, embedding -----------------------------------------------------

TEST_F(ShapeRules, RopeNeedsAStaticEvenLastDim) {
  Value odd = in("odd", {L, Dim("R", 63)}), dyn = in("dyn", {L, E}), v = in("v", {Dh});
  EXPECT_EQ(error_of([&] { rope(odd); }),
            "rope: 'odd' (L, R) ends in 'R'(63); rope rotates pairs of features and needs a "
            "static, even last dim");
  EXPECT_TRUE(ErrorSays([&] { rope(dyn); }, {"rope: 'dyn' (L, E) ends in 'E'(dynamic)"}));
  EXPECT_TRUE(ErrorSays([&] { rope(v); }, {"rope: 'v' (Dh) has 1 dims; rope needs (..., L, Dh)"}));
  Value x = in("x", {L, Dh});
  EXPECT_TRUE(ErrorSays([&] { rope(x, {.base = -1}); }, {"rope: base must be positive"}));
  EXPECT_TRUE(ErrorSays([&] { rope(x, {.offset = -2}); }, {"rope: offset must not be negative"}));
}

TEST_F(ShapeRules, NormParamsAreTheLastDim) {
  Value x = in("x", {L, D}), gk = in("gk", {K}), gd = in("gd", {D}), g2 = in("g2", {L, D});
  Value g64 = in("g64", {D}, DType::F64), s = in("s", {});
  EXPECT_EQ(error_of([&] { layer_norm(x, gk, gd); }),
            "layer_norm: gamma 'gk' (K) must be (D), the last dim of 'x' (L, D)");
  EXPECT_EQ(error_of([&] { layer_norm(x, gd, g2); }),
            "layer_norm: beta 'g2' (L, D) must be (D), the last dim of 'x' (L, D)");
  EXPECT_EQ(error_of([&] { rms_norm(x, gk); }),
            "rms_norm: gamma 'gk' (K) must be (D), the last dim of 'x' (L, D)");
  EXPECT_TRUE(ErrorSays([&] { rms_norm(x, g64); }, {"rms_norm: dtypes differ"}));
  EXPECT_TRUE(ErrorSays([&] { layer_norm(s); }, {"layer_norm: 's' () has 0 dims"}));
  EXPECT_TRUE(ErrorSays([&] { layer_norm(x, -1.0); }, {"layer_norm: eps must not be negative"}));
  EXPECT_TRUE(ErrorSays([&] { rms_norm(x, -1.0); }, {"rms_norm: eps must not be negative"}));
}

TEST_F(ShapeRules, SwigluNeedsEqualDims) {
  Value a = in("a", {L, D}), b = in("b", {L, Dim("F", 2048)});
  EXPECT_EQ(error_of([&] { swiglu(a, b); }),
            "swiglu: the tensors must have exactly the same dims: 'a' (L, D); 'b' (L, F)");
}

TEST_F(ShapeRules, EmbeddingIdsTableRules) {
  Value x = in("x", {L}), ids = in("ids", {B, L}, DType::I32);
  Value t1 = in("t1", {Dim("V", 100)}), ti = in("ti", {Dim("V", 100), D}, DType::I64);
  Value t = in("t", {Dim("V", 100), D});
  EXPECT_EQ(error_of([&] { embedding(x, t); }),
            "embedding: ids 'x' (L) must be i32 or i64, got f32");
  EXPECT_EQ(error_of([&] { embedding(ids, t1); }),
            "embedding: table 't1' (V) must have 2 dims (vocab, features)");
  EXPECT_TRUE(ErrorSays([&] { embedding(ids, ti); }, {"embedding: 'ti' (V, D) is i64"}));
  Value e = embedding(ids, t);
  EXPECT_EQ(e.dims(), (std::vector<Dim>{B, L, D}));
  EXPECT_EQ(e.dtype(), DType::F32);
}

// ---- attention ---------------------------------------------------------------------------

TEST_F(ShapeRules, AttentionHeadDim) {
  Value q = in("q", {H, L, Dh}), k = in("k", {H, S, D}), v = in("v", {H, S, Dh});
  EXPECT_EQ(error_of([&] { attention(q, k, v); }),
            "attention: q and k must share the head dim: 'q' ends in 'Dh'(64), 'k' in 'D'(512)");
}

TEST_F(ShapeRules, AttentionSeqDim) {
  Value q = in("q", {H, L, Dh}), k = in("k", {H, S, Dh}), v = in("v", {H, L, Dh});
  EXPECT_EQ(error_of([&] { attention(q, k, v); }),
            "attention: k and v must share the sequence dim: 'k' has 'S'(dynamic), 'v' has "
            "'L'(dynamic)");
}

TEST_F(ShapeRules, AttentionBatchDim) {
  Value q = in("q", {B, H, L, Dh}), k = in("k", {C, H, S, Dh}), v = in("v", {B, H, S, Dh});
  EXPECT_EQ(error_of([&] { attention(q, k, v); }),
            "attention: q, k and v must share the batch dim: 'q' (B, H, L, Dh), 'k' (C, H, S, "
            "Dh), 'v' (B, H, S, Dh)");
}

TEST_F(ShapeRules, AttentionKvHeads) {
  Value q = in("q", {H, L, Dh}), k = in("k", {Hkv, S, Dh}), v = in("v", {H, S, Dh});
  EXPECT_EQ(error_of([&] { attention(q, k, v); }),
            "attention: k and v must have the same heads: 'k' has 'Hkv'(2), 'v' has 'H'(8)");
}

TEST_F(ShapeRules, AttentionGroupedQueryHeads) {
  Value q = in("q", {H, L, Dh});
  Value k3 = in("k3", {Dim("G", 3), S, Dh}), kd = in("kd", {Dim("Gd"), S, Dh});
  EXPECT_EQ(error_of([&] { attention(q, k3, k3); }),
            "attention: 8 query heads 'H'(8) cannot share 3 kv heads 'G'(3) (grouped-query "
            "attention needs a whole number of query heads per kv head)");
  EXPECT_EQ(error_of([&] { attention(q, kd, kd); }),
            "attention: q has heads 'H'(8) and k has heads 'Gd'(dynamic); grouped-query attention "
            "needs both head counts static");
  Value k = in("k", {Hkv, S, Dh});
  EXPECT_EQ(attention(q, k, k).value().dims(), (std::vector<Dim>{H, L, Dh}));
}

TEST_F(ShapeRules, AttentionRanksAndDtypes) {
  Value q = in("q", {H, L, Dh}), k2 = in("k2", {S, Dh}), v1 = in("v1", {Dh});
  Value k5 = in("k5", {B, C, H, S, Dh}), q64 = in("q64", {S, Dh}, DType::F64);
  Value ids = in("ids", {S, Dh}, DType::I32);
  EXPECT_EQ(error_of([&] { attention(q, k2, k2); }),
            "attention: q, k and v must have the same number of dims: 'q' (H, L, Dh), 'k2' (S, "
            "Dh), 'k2' (S, Dh)");
  EXPECT_EQ(error_of([&] { attention(v1, v1, v1); }),
            "attention: 'v1' (Dh) must have 2 (L, Dh), 3 (H, L, Dh) or 4 (B, H, L, Dh) dims");
  EXPECT_TRUE(ErrorSays([&] { attention(k5, k5, k5); }, {"'k5' (B, C, H, S, Dh) must have 2"}));
  EXPECT_TRUE(ErrorSays([&] { attention(k2, q64, q64); }, {"attention: dtypes differ"}));
  EXPECT_TRUE(ErrorSays([&] { attention(ids, ids, ids); }, {"attention: 'ids' (S, Dh) is i32"}));
}

TEST_F(ShapeRules, AttentionBuilderRules) {
  Value q = in("q", {H, L, Dh}), k = in("k", {H, S, Dh});
  Attention a = attention(q, k, k);
  EXPECT_EQ(error_of([&] { a.scale(std::nan("")); }), "attention: scale is NaN");
  a.score_mod([](Expr s, Expr, Expr, Expr, Expr) { return s * 2.0; });
  EXPECT_TRUE(ErrorSays([&] { a.score_mod([](Expr s, Expr, Expr, Expr, Expr) { return s; }); },
                        {"score_mod is already set; compose both in one lambda"}));
  Value late = in("late", {H});
  EXPECT_TRUE(ErrorSays([&] { a.mask([&](Expr, Expr h, Expr, Expr) { return late[h] > 0.0; }); },
                        {"a mod loads 'late' (H), which was made after the op"}));
  EXPECT_TRUE(ErrorSays([&] { a.mask(MaskFn{}); }, {"attention: empty mask_mod"}));
  Value used = scale(a, 2.0);
  EXPECT_EQ(error_of([&] { a.mask(causal_mask()); }),
            "attention 'attention#2': .mask() must come before the result is used");
  (void)used;
  // Two masks combine with &&.
  Attention b = attention(q, k, k);
  b.mask(causal_mask()).mask(sliding_window_mask(4));
  EXPECT_EQ(to_string(b.value().node().attrs.mask), "q >= kv && (q >= kv && q - kv < 4)");
}

TEST_F(ShapeRules, LinearAttentionSharesTheRules) {
  Value q = in("q", {H, L, Dh}), k = in("k", {H, S, D}), v = in("v", {H, S, Dh});
  EXPECT_TRUE(
      ErrorSays([&] { linear_attention(q, k, v); },
                {"linear_attention: q and k must share the head dim", "'Dh'(64)", "'D'(512)"}));
  Value k2 = in("k2", {H, S, Dh}), v2 = in("v2", {H, L, Dh});
  EXPECT_TRUE(ErrorSays([&] { linear_attention(q, k2, v2); },
                        {"linear_attention: k and v must share the sequence dim"}));
}

// ---- linformer ---------------------------------------------------------------------------

TEST_F(ShapeRules, LinformerProjectRules) {
  Value x = in("x", {L, D}), e = in("e", {Dim("Kp", 4), S}), e3 = in("e3", {B, Dim("Kp", 4), L});
  Value v = in("v", {D});
  EXPECT_EQ(error_of([&] { linformer_project(x, e); }),
            "linformer_project: the projection's last dim must be the input's sequence dim, its "
            "second-to-last: 'e' (Kp, S), its 'S'(dynamic) at dim 1; 'x' (L, D), its "
            "'L'(dynamic) at dim 0");
  EXPECT_EQ(error_of([&] { linformer_project(x, e3); }),
            "linformer_project: the tensor must have 2 dims: 'e3' (B, Kp, L) has 3 dims");
  EXPECT_EQ(error_of([&] { linformer_project(v, e); }),
            "linformer_project: the tensor needs at least 2 dims: 'v' (D) has 1 dims");
}

// ---- values from elsewhere ---------------------------------------------------------------

TEST_F(ShapeRules, ArgumentsFromAnotherGraphOrNowhere) {
  Graph other("other");
  Value a = in("a", {L, K}), b = other.input("b", DType::F32, {K, N});
  EXPECT_EQ(error_of([&] { matmul(a, b); }),
            "matmul: arguments come from different graphs ('b' is from graph 'other', not 'g')");
  EXPECT_EQ(error_of([&] { matmul(a, Value()); }),
            "matmul: an argument is an empty Value (not made by a graph)");
}

// verify() runs the same rules on every node; a node edited into a broken state is named.
TEST_F(ShapeRules, VerifyNamesTheBrokenNode) {
  Value q = in("q", {L, Dh}), k = in("k", {Dh, S});
  Value s = matmul(q, k).named("scores");
  g.output("s", s);
  g.verify();
  g.mutable_node(s.id()).inputs = {q.id(), q.id()};
  EXPECT_EQ(error_of([&] { g.verify(); }),
            "graph 'g', node %2 'scores': matmul: contraction dims differ: 'q' (L, Dh) has "
            "'Dh'(64) last, 'q' (L, Dh) has 'L'(dynamic) second to last");
}

} // namespace

// ---- KV caches and rope positions --------------------------------------------------------

namespace {

class CacheRules : public ShapeRules {
protected:
  Dim n{"n", 1}, P{"P"}, M{"M"}, page{"page", 16};
};

TEST_F(CacheRules, CacheViewShape) {
  Value past = in("past", {B, Hkv, C, Dh}), fresh = in("fresh", {B, Hkv, n, Dh});
  Value len = in("len", {B}, DType::I64);
  Value v = cache_view(past, len, fresh);
  EXPECT_EQ(describe(v.dims()), "(B, Hkv, C+n, Dh)");
}

TEST_F(CacheRules, CacheViewNeedsIntegerLengthsOverTheBatch) {
  Value past = in("past", {B, Hkv, C, Dh}), fresh = in("fresh", {B, Hkv, n, Dh});
  Value lenf = in("lenf", {B}), lenl = in("lenl", {L}, DType::I32);
  EXPECT_EQ(error_of([&] { cache_view(past, lenf, fresh); }),
            "cache_view: lengths 'lenf' (B) must be an i32 or i64 (B)");
  EXPECT_EQ(error_of([&] { cache_view(past, lenl, fresh); }),
            "cache_view: lengths 'lenl' (L) must be an i32 or i64 (B)");
}

TEST_F(CacheRules, CacheViewPartsMustAgree) {
  Value past = in("past", {B, Hkv, C, Dh}), len = in("len", {B}, DType::I64);
  Value heads = in("heads", {B, H, n, Dh}), batch = in("batch", {L, Hkv, n, Dh});
  Value flat = in("flat", {Hkv, n, Dh});
  EXPECT_EQ(error_of([&] { cache_view(past, len, heads); }),
            "cache_view: 'past' (B, Hkv, C, Dh) and 'heads' (B, H, n, Dh) must share kv heads "
            "(dim 1) and head dim (dim 3)");
  EXPECT_TRUE(ErrorSays([&] { cache_view(past, in("len2", {L}, DType::I64), batch); },
                        {"cache_view", "'past' (B, Hkv, C, Dh)", "must share the batch dim"}));
  EXPECT_TRUE(ErrorSays([&] { cache_view(past, len, flat); }, {"'flat'", "must have 4 dims"}));
}

TEST_F(CacheRules, PagedCacheViewShapeAndTable) {
  Value pool = in("pool", {P, Hkv, page, Dh}), fresh = in("fresh", {B, Hkv, n, Dh});
  Value table = in("table", {B, M}, DType::I32), len = in("len", {B}, DType::I64);
  EXPECT_EQ(describe(paged_cache_view(pool, table, len, fresh).dims()), "(B, Hkv, M*page+n, Dh)");
  Value wrong = in("wrong", {L, M}, DType::I32);
  EXPECT_EQ(error_of([&] { paged_cache_view(pool, wrong, len, fresh); }),
            "paged_cache_view: table 'wrong' (L, M) must be an i32 or i64 (B, pages per sequence)");
}

TEST_F(CacheRules, RopePositions) {
  Value x = in("x", {B, H, L, Dh});
  EXPECT_NO_THROW(rope(x, in("p1", {L}, DType::I64)));
  EXPECT_NO_THROW(rope(x, in("p2", {B, L}, DType::I32)));
  EXPECT_EQ(error_of([&] {
              rope(x, in("p3", {H, L}, DType::I32));
            }),
            "rope: positions 'p3' (H, L) must be (L) or (B, L) for 'x' (B, H, L, Dh)");
  EXPECT_EQ(error_of([&] { rope(x, in("p4", {L})); }),
            "rope: positions 'p4' (L) must be i32 or i64, got f32");
  EXPECT_EQ(error_of([&] {
              rope(x, in("p5", {L}, DType::I32), {10000, false, 3});
            }),
            "rope: positions and an offset cannot be combined");
}

} // namespace

// ---- dims without names: the MLIR dialect's verifier --------------------------------------

namespace {

UnnamedType t(std::vector<std::int64_t> extents, DType dt = DType::F32) { return {dt, extents}; }

// A `?` equals any dim, a static dim is its extent: the dialect's rule of compatibility.
TEST(UnnamedRules, UnknownDimsMatchAnyDim) {
  UnnamedType r = infer_unnamed(OpKind::MatMul, {t({kDynamic, 6}), t({kDynamic, 5})}, {});
  EXPECT_EQ(r.extents, (std::vector<std::int64_t>{kDynamic, 5}));
  r = infer_unnamed(OpKind::Add, {t({kDynamic, 6}), t({6})}, {});
  EXPECT_EQ(r.extents, (std::vector<std::int64_t>{kDynamic, 6}));
  // merge_heads of an unknown head count: the product is unknown too.
  r = infer_unnamed(OpKind::MergeHeads, {t({kDynamic, 7, 4})}, {});
  EXPECT_EQ(r.extents, (std::vector<std::int64_t>{7, kDynamic}));
  Attrs axis;
  axis.axes = {0};
  r = infer_unnamed(OpKind::Concat, {t({2, 3}), t({kDynamic, 3})}, axis);
  EXPECT_EQ(r.extents, (std::vector<std::int64_t>{kDynamic, 3}));
  r = infer_unnamed(OpKind::Concat, {t({2, 3}), t({4, 3})}, axis);
  EXPECT_EQ(r.extents, (std::vector<std::int64_t>{6, 3}));
}

TEST(UnnamedRules, StaticDimsAreTheirExtentsAndMessagesSayOperandI) {
  EXPECT_EQ(error_of([] {
              infer_unnamed(OpKind::MatMul, {t({4, 6}), t({5, 3})}, {});
            }),
            "matmul: contraction dims differ: 'operand 0' (4, 6) has 6 last, 'operand 1' (5, "
            "3) has 5 second to last");
  EXPECT_EQ(error_of([] {
              infer_unnamed(OpKind::Swiglu, {t({kDynamic, 6}), t({2, 5})}, {});
            }),
            "swiglu: the tensors must have exactly the same dims: 'operand 0' (?, 6); 'operand 1' "
            "(2, 5)");
}

// Heads the dialect does not know against a count may be a grouped-query attention, whose
// lowering needs both counts; two unknown counts are the same heads.
TEST(UnnamedRules, UnknownHeadsAgainstACountAreRefused) {
  EXPECT_EQ(error_of([] {
              infer_unnamed(OpKind::Attention,
                            {t({kDynamic, kDynamic, 4}), t({2, kDynamic, 4}), t({2, kDynamic, 4})},
                            {});
            }),
            "attention: q has heads ? and k has heads 2; grouped-query attention needs both "
            "head counts static");
  EXPECT_NO_THROW(infer_unnamed(
      OpKind::Attention,
      {t({kDynamic, 9, 4}), t({kDynamic, kDynamic, 4}), t({kDynamic, kDynamic, 4})}, {}));
  EXPECT_EQ(error_of([] {
              infer_unnamed(OpKind::Attention,
                            {t({4, kDynamic, 4}), t({0, kDynamic, 4}), t({0, kDynamic, 4})}, {});
            }),
            "attention: query and kv heads must not be 0: 'operand 0' (4, ?, 4), 'operand 1' "
            "(0, ?, 4)");
}

// Extents the dialect's types may hold (up to 2^63 - 1) multiply without overflow.
TEST(UnnamedRules, DerivedExtentsThatOverflowAreRefused) {
  constexpr std::int64_t big = std::int64_t{1} << 40;
  EXPECT_TRUE(ErrorSays(
      [&] {
        infer_unnamed(OpKind::MergeHeads, {t({big, 3, big})}, {});
      },
      {"overflows 64 bits"}));
  Attrs axis;
  axis.axes = {0};
  constexpr std::int64_t most = std::numeric_limits<std::int64_t>::max();
  EXPECT_TRUE(ErrorSays(
      [&] {
        infer_unnamed(OpKind::Concat, {t({most, 3}), t({most, 3})}, axis);
      },
      {"overflows 64 bits"}));
}

// No graph holds an unknown dim: a user cannot name one.
TEST(UnnamedRules, NoGraphHoldsAnUnknownDim) {
  Graph g("g");
  EXPECT_THROW(g.dim("?"), Error);
  EXPECT_THROW(g.input("x", DType::F32, {unknown_dim()}), Error);
  Value x = g.input("x", DType::F32, {Dim("L"), Dim("D", 8)});
  EXPECT_THROW(split_heads(x, Dim("H", 2), unknown_dim()), Error);
}

// ---- the shared constexpr rules (<qkv/dsl/shape_rules.hpp>) -------------------------------
//
// The same functions the typed layer evaluates at compile time and infer_type at run time:
// checked here both ways, so a rule that cannot be evaluated at compile time fails to build.

namespace sr = qkv::shape;

constexpr sr::DimView kL{"L"}, kDh{"Dh", 64}, kD{"D", 512}, kS{"S"}, kH{"H", 8};
constexpr sr::DimView kQ[] = {kL, kDh}, kK[] = {kD, kS}, kK2[] = {kDh, kS};
constexpr sr::TensorView kQv{DType::F32, kQ}, kKv{DType::F32, kK}, kK2v{DType::F32, kK2};
constexpr sr::TensorView kPair[] = {kQv, kKv}, kGood[] = {kQv, kK2v};

// Evaluable at compile time (the typed layer's use); the rest is checked at run time, so
// that a mutant of a rule fails a test rather than the build.
static_assert(sr::matmul(kPair).broken == sr::Rule::matmul_contraction_dims_match);
static_assert(sr::matmul(kGood).ok() && sr::matmul(kGood).rank == 2);

TEST(SharedRules, EveryRuleHasASentence) {
  for (int r = 1; r <= static_cast<int>(sr::Rule::last); ++r)
    EXPECT_FALSE(sr::summary(static_cast<sr::Rule>(r)).empty()) << "Rule " << r;
}

TEST(SharedRules, DimsAndDerivedNames) {
  EXPECT_EQ(sr::matmul(kPair).da, 1);
  EXPECT_EQ(sr::matmul(kPair).db, 0);
  EXPECT_TRUE(sr::same(kD, {"D", 512}));
  EXPECT_FALSE(sr::same(kD, {"D", 256})); // one name, two extents: not one dim
  EXPECT_TRUE(sr::same(kD, {"?", -1, true}));
  EXPECT_TRUE(sr::is_product_name("H*Dh", "H", "Dh"));
  EXPECT_TRUE(sr::is_product_name("(A+B)*C", "A+B", "C"));
  EXPECT_FALSE(sr::is_product_name("A+B*C", "A+B", "C"));
  EXPECT_FALSE(sr::is_product_name("H*Dhx", "H", "Dh"));
  EXPECT_TRUE(sr::product_matches(kH, kDh, {"X", 512}));
  EXPECT_FALSE(sr::product_matches(kH, kDh, {"X", 511}));
  EXPECT_TRUE(sr::product_matches(kH, kL, {"H*L"}));
  EXPECT_FALSE(sr::product_matches(kH, kL, {"L*H"}));
}

TEST(SharedRules, VerdictNamesTheRuleOperandsAndDims) {
  sr::DimView x[] = {kL, {"Dh", 64}}, w[] = {kD, kH};
  sr::TensorView in[] = {{DType::F32, x}, {DType::F32, w}};
  sr::Verdict v = sr::linear(in);
  EXPECT_EQ(v.broken, sr::Rule::linear_input_dim_is_weight_first_dim);
  EXPECT_EQ(v.a, 0);
  EXPECT_EQ(v.b, 1);
  EXPECT_EQ(v.da, 1);
  EXPECT_EQ(v.db, 0);
  in[0].dtype = DType::I32;
  EXPECT_EQ(sr::linear(in).broken, sr::Rule::is_float_tensor);
  in[0].dtype = DType::F64;
  EXPECT_EQ(sr::linear(in).broken, sr::Rule::same_dtype);
}

TEST(SharedRules, ResultDimsSayWhereEachComesFrom) {
  sr::DimView x[] = {kL, kH, kS, kDh};
  sr::TensorView in[] = {{DType::F32, x}};
  sr::Verdict v = sr::merge_heads(in, {});
  ASSERT_TRUE(v.ok());
  ASSERT_EQ(v.rank, 3);
  EXPECT_EQ(v.dims[2].kind, sr::DimSource::Product);
  EXPECT_EQ(v.dims[2].dim, 1);
  EXPECT_EQ(v.dims[2].dim2, 3);
  sr::DimView parts[] = {kL, kDh}, other[] = {kL, {"E", 3}};
  sr::TensorView cat[] = {{DType::F32, parts}, {DType::F32, other}};
  EXPECT_TRUE(sr::sum_matches(cat, 1, {"Dh+E"}));
  EXPECT_TRUE(sr::sum_matches(cat, 1, {"X", 67}));
  EXPECT_FALSE(sr::sum_matches(cat, 1, {"E+Dh"}));
  EXPECT_FALSE(sr::sum_matches(cat, 1, {"Dh+E+F"})); // the whole name, not a prefix
  EXPECT_FALSE(sr::sum_matches(cat, 1, {"Dh"}));
  EXPECT_FALSE(sr::sum_matches(cat, 1, {"X", 66}));
}

// A rule without a message of its op's own (here: too many dims) says its sentence and
// what it is about.
TEST(SharedRules, ARuleWithoutItsOwnMessageSaysItsSentence) {
  Graph g("g");
  std::vector<Dim> dims;
  for (int i = 0; i < 16; ++i)
    dims.push_back(Dim("d" + std::to_string(i), 2));
  Value x = g.input("x", DType::F32, dims);
  EXPECT_TRUE(ErrorSays([&] { embedding(g.input("ids", DType::I32, dims), x); },
                        {"embedding: a tensor has more dims than qkv's ops take (16 in the "
                         "result): 'ids' (d0, d1,"}));
  EXPECT_NO_THROW(gelu(x));
}

} // namespace
