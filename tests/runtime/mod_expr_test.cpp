// Mod expression semantics: C++ integer arithmetic on int64, float math in double,
// conversions, select, logic and loads. Each mod is run as a score_mod or mask over a
// (L, 1) score tensor of zeros, so the result at row q is the expression at that q.
#include <cmath>
#include <cstdint>
#include <limits>

#include "test_util.hpp"

namespace qkv {
namespace {

using test::expect_error;
using test::expect_values;
using test::run1;

const double X = -std::numeric_limits<double>::infinity();
// At namespace scope: GCC 12 calls a local constexpr that only generic lambdas read "set
// but not used" (-Wunused-but-set-variable).
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();

template <class F> Tensor over_q(std::int64_t n, F &&f) {
  Graph g("mod");
  Value s = g.input("s", DType::F64, {g.dim("L"), g.dim("S", 1)});
  g.output("y", score_mod(s, std::forward<F>(f)));
  return run1(g, {{"s", Tensor(DType::F64, {n, 1})}});
}

template <class F> Tensor mask_over_q(std::int64_t n, F &&f) {
  Graph g("mod");
  Value s = g.input("s", DType::F64, {g.dim("L"), g.dim("S", 1)});
  g.output("y", mask(s, std::forward<F>(f)));
  return run1(g, {{"s", Tensor(DType::F64, {n, 1})}});
}

TEST(ModExpr, IntegerDivisionTruncatesTowardZero) {
  // (q - 2) / 2 for q = 0..4: -2/2, -1/2, 0/2, 1/2, 2/2 = -1, 0, 0, 0, 1 (floor: -1 at q = 1)
  Tensor y = over_q(5, [](auto, auto, auto, auto q, auto) { return (q - 2) / 2; });
  expect_values(y, {5, 1}, {-1, 0, 0, 0, 1});
}

TEST(ModExpr, RemainderTakesTheDividendsSign) {
  // (q - 3) % 2 for q = 0..4: -3%2, -2%2, -1%2, 0%2, 1%2 = -1, 0, -1, 0, 1 (Python: 1, 0, 1, 0, 1)
  Tensor y = over_q(5, [](auto, auto, auto, auto q, auto) { return (q - 3) % 2; });
  expect_values(y, {5, 1}, {-1, 0, -1, 0, 1});
}

TEST(ModExpr, IntegerWithFloatIsFloat) {
  // q / 2.0 divides in floating point; to_float(q) / 4 too.
  expect_values(over_q(3, [](auto, auto, auto, auto q, auto) { return q / 2.0; }), {3, 1},
                {0, 0.5, 1});
  expect_values(over_q(3, [](auto, auto, auto, auto q, auto) { return to_float(q) / 4; }), {3, 1},
                {0, 0.25, 0.5});
  // 1.0 / 0.0 is +inf, not an error: only integer division checks for zero.
  expect_values(over_q(1, [](auto, auto, auto, auto q, auto) { return 1.0 / to_float(q); }), {1, 1},
                {std::numeric_limits<double>::infinity()});
}

TEST(ModExpr, MinMaxAbsNeg) {
  // q = 0..3
  expect_values(over_q(4, [](auto, auto, auto, auto q, auto) { return min(q, Expr(2)); }), {4, 1},
                {0, 1, 2, 2});
  expect_values(over_q(4, [](auto, auto, auto, auto q, auto) { return max(q, Expr(2)); }), {4, 1},
                {2, 2, 2, 3});
  expect_values(over_q(4, [](auto, auto, auto, auto q, auto) { return abs(q - 2); }), {4, 1},
                {2, 1, 0, 1});
  expect_values(over_q(4, [](auto, auto, auto, auto q, auto) { return -q * 3; }), {4, 1},
                {0, -3, -6, -9});
}

TEST(ModExpr, FloatFunctions) {
  // pow(2, q) = 1, 2, 4, 8; sqrt(q*q) = q; exp(log(q + 1)) = q + 1; tanh(0) = 0
  expect_values(over_q(4, [](auto, auto, auto, auto q, auto) { return pow(Expr(2.0), q); }), {4, 1},
                {1, 2, 4, 8});
  expect_values(over_q(4, [](auto, auto, auto, auto q, auto) { return sqrt(q * q); }), {4, 1},
                {0, 1, 2, 3});
  expect_values(over_q(4, [](auto, auto, auto, auto q, auto) { return exp(log(q + 1)); }), {4, 1},
                {1, 2, 3, 4}, 1e-14);
  expect_values(over_q(1, [](auto s, auto, auto, auto, auto) { return tanh(s); }), {1, 1}, {0});
}

TEST(ModExpr, IntegerOverflowWraps) {
  // INT64_MAX + q wraps to INT64_MIN at q = 1 (two's complement, not undefined behaviour).
  Tensor y = over_q(2, [](auto, auto, auto, auto q, auto) { return Expr(kMax) + q; });
  expect_values(y, {2, 1}, {0x1p63, -0x1p63});
}

TEST(ModExpr, Select) {
  // q >= 2 ? 10 : -10, as integers; mixed int/float branches become float.
  expect_values(
      over_q(4, [](auto, auto, auto, auto q, auto) { return select(q >= 2, Expr(10), Expr(-10)); }),
      {4, 1}, {-10, -10, 10, 10});
  expect_values(
      over_q(2, [](auto, auto, auto, auto q, auto) { return select(q == 0, Expr(0.5), q); }),
      {2, 1}, {0.5, 1});
}

TEST(ModExpr, ComparisonsAndLogic) {
  // keep q != 1 && !(q == 3) || q == 3 && kv == 0 -> q = 0, 2, 3 kept; q = 1 masked
  Tensor y = mask_over_q(
      4, [](auto, auto, auto q, auto kv) { return (q != 1 && !(q == 3)) || (q == 3 && kv == 0); });
  expect_values(y, {4, 1}, {0, X, 0, 0});
  // float comparison against the score: 0 < 0.5 everywhere, 0 > 0.5 nowhere
  expect_values(mask_over_q(2, [](auto, auto, auto q, auto) { return to_float(q) < 0.5; }), {2, 1},
                {0, X});
  // len_q is the extent of the q axis: keep the last row only
  expect_values(mask_over_q(3, [](auto, auto, auto q, auto) { return q == len_q() - 1; }), {3, 1},
                {X, X, 0});
}

TEST(ModExpr, LoadsFromIntegerAndFloatTables) {
  Graph g("loads");
  Dim L = g.dim("L", 3);
  Value s = g.input("s", DType::F64, {L, g.dim("S", 1)});
  Value ti = g.param("ti", DType::I64, {L});
  Value tf = g.param("tf", DType::F32, {g.dim("R", 2), L});
  // integer table: ti[q] * 3 / 2 in integer arithmetic; 2-D float table: tf[1, q]
  g.output("y", score_mod(s, [&](auto, auto, auto, auto q, auto) {
             return to_float(ti[q] * 3 / 2) + tf(1, q);
           }));
  // ti = [5, 7, 11] -> 15/2, 21/2, 33/2 = 7, 10, 16; tf row 1 = [0.5, 0.25, 0.125]
  Tensor y = run1(g, {{"s", Tensor(DType::F64, {3, 1})},
                      {"ti", Tensor::from_i64({3}, {5, 7, 11})},
                      {"tf", Tensor::from_f32({2, 3}, {9, 9, 9, 0.5, 0.25, 0.125})}});
  expect_values(y, {3, 1}, {7.5, 10.25, 16.125});
}

TEST(ModExpr, IntegersBeyond2To53AreRefused) {
  // Node values are doubles; an i64 table entry they cannot hold exactly is an error, not
  // a silently rounded index.
  Graph g("big");
  Dim L = g.dim("L", 1);
  Value s = g.input("s", DType::F64, {L, g.dim("S", 1)});
  Value t = g.param("t", DType::I64, {L});
  g.output("y", score_mod(s, [&](auto, auto, auto, auto q, auto) { return t[q] % 7; }));
  expect_error(
      [&] {
        reference::run(g, {{"s", Tensor(DType::F64, {1, 1})},
                           {"t", Tensor::from_i64({1}, {(std::int64_t{1} << 60) + 1})}});
      },
      {"loads 't'[0] = 1152921504606846976", "2^53"});
}

TEST(ModExpr, EveryOperandIsEvaluated) {
  // select and && evaluate both sides, as a vectorised kernel does: the guard q < 2 does
  // not stop the load t[q] at q = 2 from being reported.
  Graph g("guard");
  Dim L = g.dim("L");
  Value s = g.input("s", DType::F64, {L, g.dim("S", 1)});
  Value t = g.param("t", DType::F64, {g.dim("N", 2)});
  g.output("y", score_mod(s, [&](auto, auto, auto, auto q, auto) {
             return select(q < 2, t[q], Expr(0.0));
           }));
  TensorMap in{{"s", Tensor(DType::F64, {3, 1})}, {"t", Tensor(DType::F64, {2})}};
  expect_error([&] { reference::run(g, in); }, {"loads 't'[2]", "(b=0, h=0, q=2, kv=0)"});

  Graph m("guard");
  Value sm = m.input("s", DType::F64, {m.dim("L"), m.dim("S", 1)});
  Value tm = m.param("t", DType::F64, {m.dim("N", 2)});
  m.output("y", mask(sm, [&](auto, auto, auto q, auto) { return q < 2 && tm[q] > 0.0; }));
  expect_error([&] { reference::run(m, in); }, {"mask_mod loads 't'[2]", "q=2"});
}

TEST(ModExpr, DivisionOverflowIsAnError) {
  expect_error(
      [] { over_q(1, [](auto, auto, auto, auto q, auto) { return (Expr(kMin) + q) / -1; }); },
      {"integer division overflows"});
  // The remainder is mathematically 0 and is returned.
  expect_values(over_q(1, [](auto, auto, auto, auto q, auto) { return (Expr(kMin) + q) % -1; }),
                {1, 1}, {0});
}

} // namespace
} // namespace qkv
