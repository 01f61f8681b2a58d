// Mod expressions: how lambdas are traced, the type rules (int, float, condition) and
// their messages, printing, structural equality, and combining masks.
#include <qkv/dsl/graph.hpp>

#include <gtest/gtest.h>

#include "qkv_test/errors.hpp"

#include <string>

namespace {

using namespace qkv;
using qkv::test::error_of;
using qkv::test::ErrorSays;

Expr var(ExprOp op) { return detail::index_var(op); }
const Expr b = var(ExprOp::IndexB), h = var(ExprOp::IndexH), q = var(ExprOp::IndexQ),
           kv = var(ExprOp::IndexKV), score = var(ExprOp::Score);

// ---- tracing -----------------------------------------------------------------------------

TEST(ModTrace, ALambdaIsCalledOnceWithSymbolicIndices) {
  int calls = 0;
  MaskFn m = mask_fn([&](auto bb, auto hh, auto qq, auto kk) {
    ++calls;
    return bb == 0 && hh < 4 && qq >= kk;
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(to_string(m.expr), "b == 0 && h < 4 && q >= kv");
  ScoreFn s = score_fn([](auto sc, auto, auto, auto qq, auto kk) { return sc - abs(qq - kk); });
  EXPECT_EQ(to_string(s.expr), "score - float(abs(q - kv))");
  EXPECT_EQ(s.expr->type, ExprType::Float);
}

TEST(ModTrace, AMaskMayReturnAConstantBool) {
  EXPECT_EQ(to_string(mask_fn([](auto, auto, auto, auto) { return true; }).expr), "true");
}

// ---- types -------------------------------------------------------------------------------

TEST(ModTypes, IntegerAndFloatArithmetic) {
  EXPECT_EQ((q - kv).type(), ExprType::Int);
  EXPECT_EQ((q / 2).type(), ExprType::Int);
  EXPECT_EQ((q % 3).type(), ExprType::Int);
  EXPECT_EQ((q * 0.5).type(), ExprType::Float);
  EXPECT_EQ(pow(q, 2).type(), ExprType::Float); // pow is always float
  EXPECT_EQ(exp(q).type(), ExprType::Float);
  EXPECT_EQ(abs(q).type(), ExprType::Int);
  EXPECT_EQ(min(q, kv).type(), ExprType::Int);
  EXPECT_EQ(max(q, 1.5).type(), ExprType::Float);
  EXPECT_EQ(score.type(), ExprType::Float);
  EXPECT_EQ(len_q().type(), ExprType::Int);
}

TEST(ModTypes, MixingConvertsTheIntegerToFloat) {
  EXPECT_EQ((q * 0.5).str(), "float(q) * 0.5");
  EXPECT_EQ((score + 1).str(), "score + 1.0"); // a constant converts in place
  EXPECT_EQ(to_float(q - kv).str(), "float(q - kv)");
  EXPECT_EQ((q < 2.5).str(), "float(q) < 2.5");
}

TEST(ModTypes, ModuloNeedsIntegers) {
  EXPECT_EQ(error_of([] { (void)(score % 2); }),
            "mod expression: '%' takes two integers, got a float and an integer");
}

TEST(ModTypes, ConditionsAndNumbersDoNotMix) {
  BoolExpr c = q >= kv;
  // What the C++ types rule out in lambdas is still checked on the trees themselves.
  EXPECT_EQ(error_of([&] { Expr e(c.ptr()); }),
            "mod expression: a condition (q >= kv) was used where a number is needed; write "
            "qkv::select(cond, 1.0, 0.0)");
  EXPECT_EQ(error_of([&] { BoolExpr e((q + 1).ptr()); }),
            "mod expression: a number (q + 1) was used where a condition is needed; compare it, "
            "e.g. x != 0");
  EXPECT_EQ(error_of([&] { detail::make_binary(ExprOp::Add, c.ptr(), q.ptr()); }),
            "mod expression: '+' takes numbers, got a condition; use qkv::select to turn a "
            "condition into a number");
  EXPECT_EQ(error_of([&] { detail::make_binary(ExprOp::And, q.ptr(), c.ptr()); }),
            "mod expression: '&&' takes two conditions");
  EXPECT_EQ(error_of([&] { detail::make_unary(ExprOp::Not, q.ptr()); }),
            "mod expression: '!' takes a condition, got a number");
  EXPECT_EQ(error_of([&] { detail::make_unary(ExprOp::Exp, c.ptr()); }),
            "mod expression: 'exp' takes numbers, got a condition; use qkv::select to turn a "
            "condition into a number");
}

TEST(ModTypes, Select) {
  EXPECT_EQ(select(q >= kv, score, -1e9).str(), "select(q >= kv, score, -1e+09)");
  EXPECT_EQ(select(q >= kv, q, kv).type(), ExprType::Int);
  EXPECT_EQ(select(q >= kv, q, 0.5).str(), "select(q >= kv, float(q), 0.5)");
  EXPECT_EQ(select(h == 0, q >= kv, q < kv).str(), "select(h == 0, q >= kv, q < kv)");
  EXPECT_EQ(error_of([&] { detail::make_select(q.ptr(), q.ptr(), kv.ptr()); }),
            "mod expression: select(cond, a, b) needs a condition first");
  EXPECT_EQ(error_of([&] { detail::make_select((q > 0).ptr(), q.ptr(), (q > 1).ptr()); }),
            "mod expression: select(cond, a, b) needs a and b both numbers or both conditions");
}

TEST(ModTypes, LoadIndicesAreIntegersAndLoadsHaveTheTensorsType) {
  Graph g("g");
  Value slopes = g.param("slopes", DType::F32, {Dim("H", 4)});
  Value docs = g.input("docs", DType::I32, {Dim("L")});
  EXPECT_EQ(slopes[h].type(), ExprType::Float);
  EXPECT_EQ(docs[q].type(), ExprType::Int);
  EXPECT_EQ(error_of([&] { slopes[score]; }),
            "mod expression: index 0 of 'slopes' (H) is the float `score`; tensor indices must "
            "be integers (positions, integer constants, loads from integer tensors and integer "
            "arithmetic on them)");
  // While a mod is traced, the error names it.
  std::string e = error_of([&] {
    score_fn([&](auto s, auto, auto, auto qi, auto) { return s + docs[qi] + slopes[qi * 0.5]; });
  });
  EXPECT_EQ(e.rfind("score_mod: index 0 of 'slopes' (H) is the float `float(q) * 0.5`", 0), 0u)
      << e;
}

// ---- printing ----------------------------------------------------------------------------

TEST(ModPrinting, PrecedenceAndParentheses) {
  EXPECT_EQ(((q - kv) * 2).str(), "(q - kv) * 2");
  EXPECT_EQ((q - (kv - 1)).str(), "q - (kv - 1)");
  EXPECT_EQ((q - kv - 1).str(), "q - kv - 1");
  EXPECT_EQ((-(q + 1)).str(), "-(q + 1)");
  EXPECT_EQ((!(q >= kv && kv >= 0)).str(), "!(q >= kv && kv >= 0)");
  EXPECT_EQ(((q > 0 || kv > 0) && h == 1).str(), "(q > 0 || kv > 0) && h == 1");
  EXPECT_EQ((q > 0 || (kv > 0 && h == 1)).str(), "q > 0 || kv > 0 && h == 1");
  EXPECT_EQ(tanh(score / 30.0).str(), "tanh(score / 30.0)");
  EXPECT_EQ((sqrt(score) + log(score)).str(), "sqrt(score) + log(score)");
  EXPECT_EQ((len_kv() - len_q()).str(), "len_kv - len_q");
}

TEST(ModPrinting, LoadsPrintTheNodeOrItsName) {
  Graph g("g");
  Value bias = g.param("bias", DType::F32, {Dim("H", 4), Dim("R", 9)});
  Expr e = score + bias(h, q - kv + 4);
  EXPECT_EQ(e.str(), "score + %0[h, q - kv + 4]");
  std::vector<std::string> names{"bias"};
  EXPECT_EQ(to_string(e.ptr(), &names), "score + bias[h, q - kv + 4]");
  EXPECT_EQ(to_string(nullptr), "<none>");
}

// ---- inspection --------------------------------------------------------------------------

TEST(ModInspection, EqualAndLoadedTensors) {
  Graph g("g");
  Value a = g.param("a", DType::F32, {Dim("H", 4)});
  Value c = g.param("c", DType::F32, {Dim("H", 4)});
  Expr e1 = score + a[h] * c[h] + a[h];
  Expr e2 = score + a[h] * c[h] + a[h];
  EXPECT_TRUE(equal(e1.ptr(), e2.ptr()));
  EXPECT_FALSE(equal(e1.ptr(), (score + a[h] * c[h] + c[h]).ptr()));
  EXPECT_FALSE(equal((q * 0.5).ptr(), (q * 0.25).ptr()));
  EXPECT_FALSE(equal((q + 1).ptr(), (q + 2).ptr()));
  EXPECT_EQ(loaded_tensors(e1.ptr()), (std::vector<std::int32_t>{a.id(), c.id()}));
}

// ---- ready-made and combined masks -------------------------------------------------------

TEST(Masks, CausalAndSlidingWindow) {
  EXPECT_EQ(to_string(causal_mask().expr), "q >= kv");
  EXPECT_EQ(to_string(sliding_window_mask(256).expr), "q >= kv && q - kv < 256");
  EXPECT_EQ(error_of([] { sliding_window_mask(0); }),
            "sliding_window_mask: window must be at least 1, got 0");
}

TEST(Masks, AndMasksKeepsWhereEveryMaskKeeps) {
  auto prefix = [](auto, auto, auto, auto k) { return k < 16; };
  MaskFn m = and_masks(causal_mask(), prefix, sliding_window_mask(8));
  EXPECT_EQ(to_string(m.expr), "q >= kv && kv < 16 && (q >= kv && q - kv < 8)");
  EXPECT_TRUE(equal(and_masks(causal_mask()).expr, causal_mask().expr));
}

TEST(Masks, OrMasksKeepsWhereAnyMaskKeeps) {
  auto prefix = [](auto, auto, auto, auto k) { return k < 16; };
  MaskFn m = or_masks(causal_mask(), prefix);
  EXPECT_EQ(to_string(m.expr), "q >= kv || kv < 16");
  // A prefix-LM mask, nested: (causal or prefix) and not padding.
  MaskFn n = and_masks(or_masks(causal_mask(), prefix),
                       [](auto, auto, auto, auto k) { return k < len_kv() - 2; });
  EXPECT_EQ(to_string(n.expr), "(q >= kv || kv < 16) && kv < len_kv - 2");
}

TEST(Masks, CombinedMasksWorkInAttention) {
  Graph g("g");
  Value docs = g.input("docs", DType::I32, {Dim("L")});
  Value x = g.input("x", DType::F32, {Dim("L"), Dim("Dh", 4)});
  MaskFn same_doc = mask_fn([&](auto, auto, auto qq, auto kk) { return docs[qq] == docs[kk]; });
  Value o = attention(x, x, x).mask(and_masks(causal_mask(), same_doc));
  EXPECT_EQ(to_string(o.node().attrs.mask), "q >= kv && %0[q] == %0[kv]");
  EXPECT_EQ(o.node().inputs, (std::vector<NodeId>{1, 1, 1, 0}));
}

} // namespace
