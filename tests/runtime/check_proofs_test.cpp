// Check sites proved safe from the dims (qkv::checks::Site::proven): the cases a checked
// kernel skips, the ones it must keep (off by one, a table of another dim, a divisor that
// reaches 0, arithmetic that wraps), and on random index expressions over small static
// dims, every proved load and division is one the interpreter evaluates without error
// at every position.
#include <functional>
#include <random>

#include <gtest/gtest.h>

#include <qkv/qkv.hpp>
#include <qkv/runtime/checks.hpp>

namespace qkv::test {
namespace {

constexpr auto B = dim<"B">;
constexpr auto L = dim<"L">;
constexpr auto S = dim<"S">;
constexpr auto H = dim<"H", 4>;
constexpr auto Dh = dim<"Dh", 4>;
constexpr auto T = dim<"T", 32>; // a static table
constexpr auto R = dim<"R">;     // a table bound at run time

using Index = std::function<IntExpr(IntExpr b, IntExpr h, IntExpr q, IntExpr kv)>;

/// Whether the one site of attention(q (B, H, L, Dh), k (B, H, S, Dh)) whose score_mod
/// adds table[index(b, h, q, kv)] is proved; the table is (dims...).
template <class... D> bool load_proved(const Index &index, D... dims) {
  Graph g("g");
  auto q = g.input<f32>("q", B, H, L, Dh);
  auto k = g.input<f32>("k", B, H, S, Dh);
  auto table = g.param<f32>("table", dims...);
  auto o = attention(q, k, k).score_mod(
      [&](auto s, auto b, auto h, auto qi, auto ki) { return s + table(index(b, h, qi, ki)); });
  g.output("o", o.value());
  std::vector<checks::Site> sites = checks::sites(g);
  EXPECT_EQ(sites.size(), 1u);
  EXPECT_EQ(checks::needs_checks(g), !sites.at(0).proven);
  return sites.at(0).proven;
}

/// Whether the integer division or remainder site of kv / divisor (op) is proved.
bool division_proved(const Index &divisor, bool remainder) {
  Graph g("g");
  auto q = g.input<f32>("q", B, H, L, Dh);
  auto k = g.input<f32>("k", B, H, S, Dh);
  auto o = attention(q, k, k).score_mod([&](auto s, auto b, auto h, auto qi, auto ki) {
    IntExpr d = divisor(b, h, qi, ki);
    return s + to_float(remainder ? ki % d : ki / d);
  });
  g.output("o", o.value());
  std::vector<checks::Site> sites = checks::sites(g);
  EXPECT_EQ(sites.size(), 1u);
  return sites.at(0).proven;
}

TEST(CheckProofs, PositionsOverTheirOwnDims) {
  EXPECT_TRUE(load_proved([](auto, auto, auto q, auto) { return q; }, L));
  EXPECT_TRUE(load_proved([](auto, auto, auto, auto kv) { return kv; }, S));
  EXPECT_TRUE(load_proved([](auto b, auto h, auto, auto) { return b * 0 + h; }, H));
  EXPECT_TRUE(load_proved([](auto b, auto, auto, auto) { return b; }, B));
  // Another dim's name, though bound to the same length in a self-attention: not proved.
  EXPECT_FALSE(load_proved([](auto, auto, auto, auto kv) { return kv; }, L));
  EXPECT_FALSE(load_proved([](auto, auto, auto q, auto) { return q + 1; }, L));
  EXPECT_FALSE(load_proved([](auto, auto, auto q, auto) { return q - 1; }, L));
}

TEST(CheckProofs, RangesWithinAStaticTable) {
  EXPECT_TRUE(load_proved([](auto, auto h, auto, auto) { return h * 8 + 7; }, T));
  EXPECT_FALSE(load_proved([](auto, auto h, auto, auto) { return h * 8 + 8; }, T));
  // Clamped into the table, T5-style buckets, a remainder by the table's size.
  EXPECT_TRUE(load_proved(
      [](auto, auto, auto q, auto kv) { return min(max(q - kv + 16, 0), 31); }, T));
  EXPECT_FALSE(load_proved(
      [](auto, auto, auto q, auto kv) { return min(max(q - kv + 16, 0), 32); }, T));
  EXPECT_FALSE(load_proved(
      [](auto, auto, auto q, auto kv) { return min(max(q - kv + 16, -1), 31); }, T));
  EXPECT_TRUE(load_proved([](auto, auto, auto q, auto kv) {
    return select(q > kv, 16, 0) + min(abs(q - kv), 15);
  }, T));
  EXPECT_TRUE(load_proved([](auto, auto, auto, auto kv) { return kv % 32; }, T));
  EXPECT_FALSE(load_proved([](auto, auto, auto q, auto kv) { return (kv - q) % 32; }, T));
  EXPECT_TRUE(load_proved([](auto, auto, auto q, auto kv) { return abs(kv - q) % 32; }, T));
  EXPECT_TRUE(load_proved([](auto, auto h, auto, auto) { return (h * 31) / 3; }, T));
  // Not within a dynamic table, nor a static one from unbounded lengths.
  EXPECT_FALSE(load_proved([](auto, auto, auto, auto) { return IntExpr(0); }, R));
  EXPECT_TRUE(load_proved([](auto, auto, auto q, auto) { return min(q, 31); }, T));
  EXPECT_FALSE(load_proved([](auto, auto, auto q, auto) { return max(q, 31); }, T));
}

TEST(CheckProofs, ArithmeticThatCanWrapIsNotProved) {
  // q * 2^40 leaves i64 for the longest sequences (a dynamic length is below 2^40);
  // min(., 31) of a wrapped value may be negative, so nothing after it is proved.
  const std::int64_t big = std::int64_t{1} << 40, fits = std::int64_t{1} << 20;
  EXPECT_FALSE(load_proved([&](auto, auto, auto q, auto) { return min(q * big, 31); }, T));
  EXPECT_TRUE(load_proved([&](auto, auto, auto q, auto) { return min(q * fits, 31); }, T));
}

TEST(CheckProofs, LoadedValuesAreAnyValueOfTheirDtype) {
  Graph g("g");
  auto q = g.input<f32>("q", B, H, L, Dh);
  auto ids = g.input<i32>("ids", B, L);
  auto table = g.param<f32>("table", T);
  auto o = attention(q, q, q).score_mod([&](auto s, auto b, auto, auto qi, auto) {
    return s + table(min(max(ids(b, qi), 0), 31)) + table(ids(b, qi));
  });
  g.output("o", o.value());
  std::vector<checks::Site> sites = checks::sites(g);
  ASSERT_EQ(sites.size(), 4u); // ids(b, qi), the clamped load, ids(b, qi), the bare load
  EXPECT_TRUE(sites[0].proven);
  EXPECT_TRUE(sites[1].proven);
  EXPECT_TRUE(sites[2].proven);
  EXPECT_FALSE(sites[3].proven);
}

TEST(CheckProofs, DivisorsThatCannotBeZero) {
  EXPECT_TRUE(division_proved([](auto, auto, auto q, auto) { return q + 1; }, false));
  EXPECT_TRUE(division_proved([](auto, auto h, auto, auto) { return h - 4; }, false));
  EXPECT_FALSE(division_proved([](auto, auto h, auto, auto) { return h - 3; }, false));
  EXPECT_FALSE(division_proved([](auto, auto, auto q, auto) { return q; }, true));
  EXPECT_TRUE(division_proved([](auto, auto, auto q, auto) { return -(q + 1); }, true));
}

/// Random integer expressions over the positions, depth <= 4.
IntExpr random_index(std::mt19937_64 &r, int depth, IntExpr b, IntExpr h, IntExpr q,
                     IntExpr kv) {
  auto pick = [&](int n) { return static_cast<int>(r() % static_cast<unsigned>(n)); };
  if (depth == 0 || pick(4) == 0) {
    switch (pick(5)) {
    case 0: return h;
    case 1: return q;
    case 2: return kv;
    case 3: return b;
    default: return IntExpr(pick(9) - 3);
    }
  }
  auto sub = [&] { return random_index(r, depth - 1, b, h, q, kv); };
  IntExpr x = sub(), y = sub();
  switch (pick(9)) {
  case 0: return x + y;
  case 1: return x - y;
  case 2: return x * y;
  case 3: return x / y;
  case 4: return x % y;
  case 5: return min(x, y);
  case 6: return max(x, y);
  case 7: return abs(x);
  default: return select(x < y, x, y + 1);
  }
}

/// A proved site never fails: over static dims small enough to evaluate every position,
/// the interpreter raises no error for a graph whose sites are all proved.
TEST(CheckProofs, ProvedSitesNeverFailInTheInterpreter) {
  constexpr auto Bs = dim<"B", 2>;
  constexpr auto Ls = dim<"L", 5>;
  constexpr auto Ss = dim<"S", 7>;
  constexpr auto Ts = dim<"T", 9>;
  std::mt19937_64 r(11);
  int proved = 0;
  for (int trial = 0; trial < 400; ++trial) {
    Graph g("g");
    auto q = g.input<f32>("q", Bs, H, Ls, Dh);
    auto k = g.input<f32>("k", Bs, H, Ss, Dh);
    auto table = g.param<f32>("table", Ts, H);
    auto o = attention(q, k, k).score_mod([&](auto s, auto b, auto h, auto qi, auto ki) {
      return s + table(random_index(r, 4, b, h, qi, ki), random_index(r, 3, b, h, qi, ki));
    });
    g.output("o", o.value());
    if (checks::needs_checks(g))
      continue;
    ++proved;
    TensorMap in = random_inputs(g, {}, static_cast<std::uint64_t>(trial));
    EXPECT_NO_THROW(reference::run(g, in)) << g.str();
  }
  EXPECT_GT(proved, 20); // the test means something only if some graphs are proved
}

} // namespace
} // namespace qkv::test
