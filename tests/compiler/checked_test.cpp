// Checked kernels (CompileOptions::checked, the default on the CPU): a load a mod makes out of a
// captured tensor's bounds is reported with the interpreter's words, on every path that
// evaluates mods (the fused kernel, the decode kernel, unfused mask/score_mod ops), and a
// checked kernel of a correct graph computes what the unchecked one does.
#include <cstdlib>
#include <filesystem>
#include <limits>

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

CompileOptions checked(bool recognize = true) {
  CompileOptions o;
  o.checked = true;
  o.recognize_attention = recognize;
  o.cache = CacheOptions::off();
  return o;
}

/// A graph compiled unchecked, then checked, in a fresh kernel-cache folder of its own.
struct UncheckedThenChecked {
  CompileOptions options; // the checked compile's
  Kernel plain, safe;
};

UncheckedThenChecked unchecked_then_checked(const Graph &g, const std::string &folder) {
  CompileOptions o;
  o.cache.dir = ::testing::TempDir() + folder;
  std::filesystem::remove_all(o.cache.dir); // left by an earlier run
  o.checked = false;
  Kernel plain = compile(g, Target::host(), o);
  o.checked = true;
  Kernel safe = compile(g, Target::host(), o);
  return {o, std::move(plain), std::move(safe)};
}

/// The interpreter's error for `in`, and the checked kernel's: they must be one message.
void expect_same_error(const Graph &g, const TensorMap &in, const CompileOptions &o) {
  std::string want = error_of([&] { reference::run(g, in); });
  ASSERT_FALSE(want.empty()) << "the interpreter accepted the inputs";
  Kernel k = compile(g, Target::host(), o);
  EXPECT_EQ(error_of([&] { k.run(in); }), want);
}

/// A relative-position bias table meant for |kv - q| <= 3: read past its end for longer
/// sequences.
Graph rel_bias_graph() {
  Graph g("rel");
  auto q = g.input<f32>("q", B, H, L, Dh);
  auto table = g.param<f32>("rel_bias", H, dim<"R", 4>);
  auto o = attention(q, q, q).named("att").score_mod(
      [&](auto s, auto, auto h, auto qi, auto ki) { return s + table(h, ki - qi + 3); });
  g.output("o", o.value());
  return g;
}

TEST(Checked, FusedScoreModLoadIsTheInterpretersError) {
  Graph g = rel_bias_graph();
  expect_same_error(g, random_inputs(g, {{"B", 1}, {"L", 2}}, 1), checked());
  // Far past the end, and in a later batch and head: the first in the interpreter's order.
  expect_same_error(g, random_inputs(g, {{"B", 3}, {"L", 37}}, 2), checked());
}

TEST(Checked, FusedMaskLoadIsTheInterpretersError) {
  Graph g("docs");
  auto q = g.input<f32>("q", B, H, L, Dh);
  auto k = g.input<f32>("k", B, H, S, Dh);
  auto doc = g.input<i32>("doc", B, L); // indexed by kv below, but kv runs over S
  auto o = attention(q, k, k).named("att").mask(
      [&](auto b, auto, auto qi, auto ki) { return doc(b, qi) == doc(b, ki); });
  g.output("o", o.value());
  expect_same_error(g, random_inputs(g, {{"B", 2}, {"L", 5}, {"S", 23}}, 1), checked());
}

TEST(Checked, NegativeIndexIsReported) {
  Graph g("neg");
  auto q = g.input<f32>("q", B, H, L, Dh);
  auto slopes = g.param<f32>("slopes", H);
  auto o = attention(q, q, q).named("att").score_mod(
      [&](auto s, auto, auto h, auto qi, auto ki) { return s + slopes(h - qi + ki - 1); });
  g.output("o", o.value());
  expect_same_error(g, random_inputs(g, {{"B", 1}, {"L", 19}}, 3), checked());
}

// An index a billion rows past the end: without the clamp the kernel would fault.
TEST(Checked, FarOutOfBoundsLoadReadsNothing) {
  Graph g("far");
  auto q = g.input<f32>("q", B, H, L, Dh);
  auto table = g.param<f32>("table", H, dim<"R", 4>);
  auto o = attention(q, q, q).named("att").score_mod([&](auto s, auto, auto h, auto qi, auto ki) {
    return s + table(h, (ki - qi) * 1000000000);
  });
  g.output("o", o.value());
  expect_same_error(g, random_inputs(g, {{"B", 2}, {"L", 33}}, 9), checked());
}

// Both mods out of bounds at the same (b, h, q, kv): the interpreter evaluates the
// score_mod first, so the score_mod's load is the one reported.
TEST(Checked, ScoreModIsReportedBeforeMaskAtOnePosition) {
  Graph g("both");
  auto q = g.input<f32>("q", B, H, L, Dh);
  auto bias = g.param<f32>("bias", dim<"R", 3>);
  auto keep = g.param<i32>("keep", dim<"R", 3>);
  auto o = attention(q, q, q)
               .named("att")
               .mask([&](auto, auto, auto, auto ki) { return keep[ki] >= 0; })
               .score_mod([&](auto s, auto, auto, auto, auto ki) { return s + bias[ki]; });
  g.output("o", o.value());
  TensorMap in = random_inputs(g, {{"B", 1}, {"L", 20}}, 10);
  std::string want = error_of([&] { reference::run(g, in); });
  EXPECT_NE(want.find("score_mod loads 'bias'[3]"), std::string::npos) << want;
  expect_same_error(g, in, checked());
}

/// A mask whose loads leave their tensor only in some tiles: the block map must not
/// classify those tiles from clamped values (and skip the mask), or the checked kernel
/// would say nothing. A load along kv (range tables) and a load at a point per tile (h);
/// the tiled kernel (L = 20, 200) and the decode kernel (L = 1).
TEST(Checked, MaskLoadsOutOfBoundsAreNotHiddenByTheBlockMap) {
  for (bool point : {false, true}) {
    Graph g("mask_only");
    auto q = g.input<f32>("q", B, H, L, Dh);
    auto keep = g.param<i32>("keep", dim<"R", 3>);
    auto o = attention(q, q, q).named("att").mask([&](auto, auto h, auto, auto ki) {
      return point ? keep[h + 2] >= 0 : keep[ki] >= 0;
    });
    g.output("o", o.value());
    for (std::int64_t len : {1, 20, 200}) {
      SCOPED_TRACE(std::string(point ? "point" : "range") + " L=" + std::to_string(len));
      TensorMap in = random_inputs(g, {{"B", 1}, {"L", len}}, 10, {{"keep", {0.0, 5.0}}});
      if (!point && len < 4)
        continue; // kv < 3 stays in bounds
      expect_same_error(g, in, checked());
    }
  }
}

TEST(Checked, DecodeKernelLoadIsTheInterpretersError) {
  Graph g("dec");
  auto q = g.input<f32>("q", B, H, dim<"one", 1>, Dh);
  auto k = g.input<f32>("k", B, H, S, Dh);
  auto pos_bias = g.param<f32>("pos_bias", dim<"P", 40>);
  auto o = attention(q, k, k).named("att").score_mod(
      [&](auto s, auto, auto, auto, auto ki) { return s + pos_bias(ki); });
  g.output("o", o.value());
  CompileOptions o1 = checked();
  Kernel kern = compile(g, Target::host(), o1);
  TensorMap fine = random_inputs(g, {{"B", 2}, {"S", 40}}, 4);
  Comparison c = compare(kern.run(fine).at("o"), reference::run(g, fine).at("o"), 1e-5, 1e-4);
  EXPECT_TRUE(c.ok) << c.message;
  expect_same_error(g, random_inputs(g, {{"B", 2}, {"S", 333}}, 4), o1);
}

/// A divisor read from a tensor: a zero one is the interpreter's error, not a trap.
TEST(Checked, IntegerDivisionByZeroIsTheInterpretersError) {
  Graph g("blocks");
  auto q = g.input<f32>("q", B, H, L, Dh);
  auto block = g.input<i32>("block", H); // per-head block size, 0 for one head below
  auto o = attention(q, q, q).named("att").mask([&](auto, auto h, auto qi, auto ki) {
    return qi / block[h] == ki / block[h];
  });
  g.output("o", o.value());
  TensorMap in = random_inputs(g, {{"B", 2}, {"L", 9}}, 7);
  in["block"] = Tensor::from_values(DType::I32, {2}, {3, 0});
  expect_same_error(g, in, checked());
  in["block"] = Tensor::from_values(DType::I32, {2}, {3, 4});
  Kernel k = compile(g, Target::host(), checked());
  Comparison c = compare(k.run(in).at("o"), reference::run(g, in).at("o"), 1e-5, 1e-4);
  EXPECT_TRUE(c.ok) << c.message;
}

/// An unchecked kernel never traps on a divisor of 0 (SIGFPE would end the host
/// program): it divides by 1 instead, so its output is the graph's with that divisor 1.
TEST(Unchecked, IntegerDivisionByZeroDividesByOne) {
  Graph g("blocks");
  auto q = g.input<f32>("q", B, H, L, Dh);
  auto block = g.input<i32>("block", H);
  auto period = g.input<i32>("period", H);
  auto o = attention(q, q, q)
               .named("att")
               .mask([&](auto, auto h, auto qi, auto ki) { return qi / block[h] == ki / block[h]; })
               .score_mod([&](auto s, auto, auto h, auto, auto ki) {
                 return s + to_float(ki % period[h]);
               });
  g.output("o", o.value());
  CompileOptions plain;
  plain.checked = false;
  plain.cache = CacheOptions::off();
  Kernel k = compile(g, Target::host(), plain);
  for (bool decode : {false, true}) { // the tiled kernel, and the decode kernel at L = 1
    TensorMap in = random_inputs(g, {{"B", 2}, {"L", decode ? 1 : 9}}, 7);
    in["block"] = Tensor::from_values(DType::I32, {2}, {3, 0});
    in["period"] = Tensor::from_values(DType::I32, {2}, {0, 2});
    Tensor got = k.run(in).at("o");
    in["block"] = Tensor::from_values(DType::I32, {2}, {3, 1});
    in["period"] = Tensor::from_values(DType::I32, {2}, {1, 2});
    Comparison c = compare(got, reference::run(g, in).at("o"), 1e-5, 1e-4);
    EXPECT_TRUE(c.ok) << (decode ? "decode: " : "tiled: ") << c.message;
  }
}

/// A checked kernel runs once per Kernel::run: its attention counts one call.
TEST(Checked, RunsTheKernelOnce) {
  Graph g = rel_bias_graph();
  Kernel k = compile(g, Target::host(), checked());
  k.run(random_inputs(g, {{"B", 1}, {"L", 1}}, 2)); // in bounds: kv - q = 0
  std::int64_t calls = 0;
  for (const auto &[name, n] : k.schedule_runs())
    calls += n;
  EXPECT_EQ(calls, 1);
}

TEST(Checked, IntegerRemainderByZeroIsTheInterpretersError) {
  Graph g("stripes");
  auto q = g.input<f32>("q", B, H, L, Dh);
  auto period = g.input<i32>("period", B);
  auto o = attention(q, q, q).named("att").score_mod(
      [&](auto s, auto b, auto, auto, auto ki) { return s + to_float(ki % period[b]); });
  g.output("o", o.value());
  TensorMap in = random_inputs(g, {{"B", 3}, {"L", 5}}, 8);
  in["period"] = Tensor::from_values(DType::I32, {3}, {2, -1, 0});
  expect_same_error(g, in, checked());
}

/// The same mods as graph ops, compiled unfused (mask and score_mod lowered to linalg)
/// and fused by recognition: both report the interpreter's error.
TEST(Checked, UnfusedModsAreCheckedToo) {
  Graph g("unfused");
  Dim Lg = g.dim("L"), D = g.dim("D", 4), R = g.dim("R", 6);
  Value x = g.input("x", DType::F32, {Lg, D});
  Value tab = g.param("tab", DType::F32, {R});
  Value lim = g.input("lim", DType::I32, {Lg});
  Value s = matmul(x, transpose(x)).named("scores");
  s = score_mod(s, [&](Expr sc, Expr, Expr, Expr qi, Expr ki) { return sc + tab[ki - qi]; })
          .named("bias");
  s = mask(s, [&](Expr, Expr, Expr qi, Expr ki) { return ki <= lim[qi + 1]; })
          .named("limit");
  g.output("out", matmul(softmax(s), x));
  TensorMap in = random_inputs(g, {{"L", 5}}, 5);
  for (bool recognize : {false, true}) {
    SCOPED_TRACE(recognize ? "recognized" : "unfused");
    expect_same_error(g, in, checked(recognize));
  }
}

/// Correct graphs at odd and dynamic sizes: the checked kernel computes the unchecked
/// kernel's outputs and reports nothing (no false alarm from padded lanes or tiles).
TEST(Checked, CorrectGraphsRunAsUnchecked) {
  Graph g("lengths");
  auto q = g.input<f32>("q", B, H, L, Dh);
  auto k = g.input<f32>("k", B, H, S, Dh);
  auto len = g.input<i32>("len", B);
  auto bias = g.param<f32>("bias", H, S);
  auto o = attention(q, k, k).named("att")
               .score_mod([&](auto s, auto b, auto h, auto, auto ki) { return s + bias(h, ki); })
               .mask([&](auto b, auto, auto, auto ki) { return ki < len(b); });
  g.output("o", o.value());
  CompileOptions plain;
  plain.checked = false;
  plain.cache = CacheOptions::off();
  Kernel fast = compile(g, Target::host(), plain), safe = compile(g, Target::host(), checked());
  for (auto [b, l, s] : {std::tuple{1, 1, 1}, {2, 17, 33}, {3, 70, 5}, {1, 129, 257}}) {
    TensorMap in = random_inputs(g, {{"B", b}, {"L", l}, {"S", s}}, 6,
                                 {{"len", {0.0, static_cast<double>(s + 1)}}});
    Comparison c = compare(safe.run(in).at("o"), fast.run(in).at("o"), 0, 0);
    EXPECT_TRUE(c.ok) << b << "x" << l << "x" << s << ": " << c.message;
  }
}

/// A table of relative offsets q - kv + len_kv - 1 with R bound at run time (not
/// provable from the dims), in the score_mod or (i32) in the mask. The tiled kernel
/// proves the check per key tile from the tile's positions and runs those tiles without
/// it: with R = 2 L - 1 every tile does, and the outputs are the unchecked kernel's, bit
/// for bit; with R = L + 20 the tiles near the diagonal pass and those 21 or more rows
/// below it fail, and the error is still the interpreter's first. L = 1 and 5 run the
/// decode kernel, which proves each key tile for all its rows. With both mods, the mask's
/// table (R2) is the short one.
TEST(Checked, TilesThatProveTheirChecksRunWithoutThem) {
  constexpr auto R = dim<"R">;
  constexpr auto R2 = dim<"R2">;
  enum Mods { Score, Mask, Both };
  for (Mods mods : {Score, Mask, Both}) {
    Graph g("rel_dyn");
    auto q = g.input<f32>("q", B, H, L, Dh);
    auto bias = g.param<f32>("bias", H, R);
    auto keep = g.param<i32>("keep", R2);
    auto o = attention(q, q, q).named("att");
    if (mods != Score)
      o = o.mask([&](auto, auto, auto qi, auto ki) { return keep(qi - ki + len_kv() - 1) >= 0; });
    if (mods != Mask)
      o = o.score_mod([&](auto s, auto, auto h, auto qi, auto ki) {
        return s + bias(h, qi - ki + len_kv() - 1);
      });
    g.output("o", o.value());
    CompileOptions plain;
    plain.checked = false;
    plain.cache = CacheOptions::off();
    Kernel fast = compile(g, Target::host(), plain), safe = compile(g, Target::host(), checked());
    const char *name[] = {"score_mod", "mask", "both"};
    for (std::int64_t len : {1, 5, 37, 300}) { // 1 and 5: the decode kernel
      SCOPED_TRACE(std::string(name[mods]) + " L=" + std::to_string(len));
      TensorMap in =
          random_inputs(g, {{"B", 2}, {"L", len}, {"R", 2 * len - 1}, {"R2", 2 * len - 1}}, 12,
                        {{"keep", {-1.0, 3.0}}});
      Comparison c = compare(safe.run(in).at("o"), fast.run(in).at("o"), 0, 0);
      EXPECT_TRUE(c.ok) << c.message;
      c = compare(safe.run(in).at("o"), reference::run(g, in).at("o"), 1e-5, 1e-4);
      EXPECT_TRUE(c.ok) << c.message;
    }
    // Both: the score_mod's table holds every offset, the mask's does not: a tile that
    // proves the score_mod's check must still check the mask.
    for (auto [len, r] : {std::pair{300, 320}, {6, 6}})
      expect_same_error(
          g,
          random_inputs(g, {{"B", 2}, {"L", len}, {"R", mods == Both ? 2 * len - 1 : r}, {"R2", r}},
                        13, {{"keep", {-1.0, 3.0}}}),
          checked());
  }
}

/// Two checked loads in one mod, each failing where the other passes (below and above the
/// diagonal, 41 or more rows away): a tile runs unchecked only where both are proved. In
/// 32 x 32 tiles the first failure, (q 0, kv 41), is the second load's, in a tile where
/// the first load is proved.
TEST(Checked, EveryCheckOfAModMustPassForATileToSkipThem) {
  constexpr auto R = dim<"R">;
  Graph g("two_sites");
  auto q = g.input<f32>("q", B, H, L, Dh);
  auto bias = g.param<f32>("bias", H, R);
  auto o = attention(q, q, q).named("att").score_mod([&](auto s, auto, auto h, auto qi, auto ki) {
    return s + bias(h, qi - ki + len_kv() - 1) + bias(h, ki - qi + len_kv() - 1);
  });
  g.output("o", o.value());
  CompileOptions o32 = checked();
  o32.schedule.q_tile = o32.schedule.kv_tile = 32;
  std::string want = error_of([&] {
    reference::run(g, random_inputs(g, {{"B", 1}, {"L", 300}, {"R", 340}}, 14));
  });
  EXPECT_NE(want.find("at (b=0, h=0, q=0, kv=41)"), std::string::npos) << want;
  expect_same_error(g, random_inputs(g, {{"B", 1}, {"L", 300}, {"R", 340}}, 14), o32);
}

/// An index whose interval ends wrap: (q - kv) * 2^63 + 2^63 (mod 2^64) is 0 where q - kv
/// is odd and -2^63 where it is even. At the ends of a tile's range (odd differences)
/// both products are -2^63, so interval arithmetic without a guard would "prove" the
/// index is 0 in every tile and run it unchecked (reading 2^63 elements before the
/// table). The proof requires sums within +-2^62 and products within +-2^31, so the
/// tiles check every element and the error is the interpreter's.
TEST(Checked, ATileProofNeverRestsOnWrappedArithmetic) {
  Graph g("wraps");
  auto q = g.input<f32>("q", B, H, L, Dh);
  auto table = g.param<f32>("table", dim<"R">);
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  auto o = attention(q, q, q).named("att").score_mod(
      [&](auto s, auto, auto, auto qi, auto ki) { return s + table((qi - ki) * kMin + kMin); });
  g.output("o", o.value());
  for (std::int64_t len : {4, 64})
    expect_same_error(g, random_inputs(g, {{"B", 1}, {"L", len}, {"R", 8}}, 15), checked());
}

TEST(Checked, OnByDefaultAndTheEnvironmentTurnsThemOff) {
  Graph g = rel_bias_graph();
  TensorMap in = random_inputs(g, {{"B", 1}, {"L", 2}}, 1);
  CompileOptions o;
  o.cache = CacheOptions::off();
  ::unsetenv("QKV_CHECKED");
  Kernel by_default = compile(g, Target::host(), o);
  std::string e = error_of([&] { by_default.run(in); });
  ::setenv("QKV_CHECKED", "1", 1);
  bool on = compile(g, Target::host(), o).stats().checked;
  ::setenv("QKV_CHECKED", "0", 1);
  bool off = compile(g, Target::host(), o).stats().checked;
  o.checked = true; // asked for: the environment does not matter
  bool asked = compile(g, Target::host(), o).stats().checked;
  ::setenv("QKV_CHECKED", "1", 1);
  o.checked = false;
  bool refused = compile(g, Target::host(), o).stats().checked;
  ::setenv("QKV_CHECKED", "maybe", 1);
  o.checked.reset();
  std::string bad = error_of([&] { compile(g, Target::host(), o); });
  ::unsetenv("QKV_CHECKED");
  EXPECT_TRUE(by_default.stats().checked);
  EXPECT_NE(e.find("score_mod loads 'rel_bias'[0, 4] out of bounds"), std::string::npos) << e;
  EXPECT_TRUE(on);
  EXPECT_FALSE(off);
  EXPECT_TRUE(asked);
  EXPECT_FALSE(refused);
  EXPECT_NE(bad.find("QKV_CHECKED is 'maybe'"), std::string::npos) << bad;
}

/// Sites proved safe from the dims carry no check: such a graph's checked kernel is its
/// unchecked one (one cache entry), and it still computes the right thing.
TEST(Checked, ProvedGraphsCompileTheUncheckedKernel) {
  Graph g("proved");
  auto q = g.input<f32>("q", B, H, L, Dh);
  auto bias = g.param<f32>("bias", L, L);
  auto doc = g.input<i32>("doc", B, L);
  auto o = attention(q, q, q)
               .mask([&](auto b, auto, auto qi, auto ki) { return doc(b, qi) == doc(b, ki); })
               .score_mod([&](auto s, auto, auto, auto qi, auto ki) { return s + bias(qi, ki); });
  g.output("o", o.value());
  auto [options, plain, safe] = unchecked_then_checked(g, "qkv-proved-cache");
  EXPECT_FALSE(safe.stats().checked);
  EXPECT_TRUE(safe.stats().from_cache) << safe.stats().cache_note;
  EXPECT_EQ(safe.stats().cache_key, plain.stats().cache_key);
  TensorMap in = random_inputs(g, {{"B", 2}, {"L", 19}}, 3, {{"doc", {0.0, 3.0}}});
  EXPECT_TRUE(check_against_reference(safe, g, in).ok);
}

/// The proofs take every dynamic extent below 2^40, and kernels refuse a longer one (an
/// empty tensor can have one).
TEST(Checked, ExtentsFrom2To40AreRefused) {
  Graph g = rel_bias_graph();
  CompileOptions o;
  o.cache = CacheOptions::off();
  Kernel k = compile(g, Target::host(), o);
  const std::int64_t too_long = std::int64_t{1} << 40;
  TensorMap in = random_inputs(g, {{"B", 0}, {"L", too_long - 1}}, 1);
  EXPECT_EQ(k.run(in).at("o").numel(), 0);
  in = random_inputs(g, {{"B", 0}, {"L", too_long}}, 1);
  EXPECT_EQ(error_of([&] { k.run(in); }),
            "graph 'rel': dim 'L' is 1099511627776; compiled kernels take extents below 2^40");
}

/// A check reports at most 16 values, so an unproved load from a tensor of rank 7 is
/// refused by a checked compile (and the error says how to compile it); a proved one is
/// not checked and compiles.
TEST(Checked, UnprovedLoadsFromRankSevenAreRefused) {
  auto build = [](bool clamp) {
    Graph g("r7");
    auto q = g.input<f32>("q", B, H, L, Dh);
    auto one = dim<"One", 1>;
    auto t = g.param<f32>("t7", one, one, one, one, one, one, dim<"F", 4>);
    auto o = attention(q, q, q).score_mod([&](auto s, auto, auto, auto, auto ki) {
      return s + t(0, 0, 0, 0, 0, 0, clamp ? min(ki, 3) : ki);
    });
    g.output("o", o.value());
    return g;
  };
  CompileOptions o;
  o.cache = CacheOptions::off();
  std::string e = error_of([&] { compile(build(false), Target::host(), o); });
  EXPECT_NE(e.find("a mod loads from 't7', of rank 7; checked kernels check loads from "
                   "tensors of rank 6 or less"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("QKV_CHECKED=0, compiles it unchecked"), std::string::npos) << e;
  o.checked = false;
  EXPECT_NO_THROW(compile(build(false), Target::host(), o));
  o.checked.reset();
  Graph proved = build(true);
  Kernel k = compile(proved, Target::host(), o);
  EXPECT_FALSE(k.stats().checked);
  EXPECT_TRUE(check_against_reference(k, proved, random_inputs(proved, {{"B", 1}, {"L", 9}}, 2)).ok);
}

/// Checked and unchecked kernels are different cache entries: an unchecked entry never
/// answers a checked compile.
TEST(Checked, CacheKeepsCheckedAndUncheckedApart) {
  Graph g = rel_bias_graph();
  auto [o, plain, safe] = unchecked_then_checked(g, "qkv-checked-cache");
  EXPECT_FALSE(safe.stats().from_cache) << safe.stats().cache_note;
  EXPECT_NE(safe.stats().cache_key, plain.stats().cache_key);
  Kernel again = compile(g, Target::host(), o);
  EXPECT_TRUE(again.stats().from_cache) << again.stats().cache_note;
  TensorMap in = random_inputs(g, {{"B", 1}, {"L", 2}}, 1);
  EXPECT_NE(error_of([&] { again.run(in); }).find("out of bounds"), std::string::npos);
}

} // namespace
} // namespace qkv::test
