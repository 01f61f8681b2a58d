// The fused attention kernel (qkv-lower-attention-to-flash) against the interpreter at
// every tile edge: lengths below, at and past a tile, Lq != Lkv, every head dim the
// micro-kernels are tuned for and a dynamic one, fully masked rows and tiles, the
// split-KV decode kernel (few queries, keys split across tasks), and every schedule
// (tile sizes, vector width, 1 and 2 threads) giving the interpreter's answer.
#include "differential.hpp"

#include <cmath>

namespace qkv::test {
namespace {

using DB = DimBindings;

/// q (B, H, L, Dh), k/v (B, Hkv, S, Dh) with static H, Hkv, Dh. At most one vector of
/// queries (Schedule::decode_rows) takes the split-KV decode kernel, more the tiled
/// kernel: a static query length (`lq`) when compiled, a dynamic one on each call.
struct Qkv {
  Value q, k, v;
};
Qkv inputs(Graph &g, std::int64_t h, std::int64_t hkv, std::int64_t dh, std::int64_t lq = 0) {
  Dim B = g.dim("B"), L = lq ? g.dim("L", lq) : g.dim("L"), S = g.dim("S");
  Dim H = g.dim("H", h), Hk = hkv == h ? H : g.dim("Hkv", hkv), Dh = g.dim("Dh", dh);
  return {g.input("q", DType::F32, {B, H, L, Dh}), g.input("k", DType::F32, {B, Hk, S, Dh}),
          g.input("v", DType::F32, {B, Hk, S, Dh})};
}

/// Compiles `build` with `options` and checks it against the interpreter on each shape
/// under the suite's tolerance rule (differential.hpp): the reductions are the head dim
/// and the keys unless `tweak` says otherwise.
void check(const std::string &name, const std::function<Graph()> &build,
           const std::vector<DB> &shapes, const CompileOptions &options = {},
           const std::function<void(DiffCase &)> &tweak = nullptr) {
  DiffCase c;
  c.name = name;
  c.build = build;
  c.shapes = shapes;
  c.sums({"Dh", "S"});
  if (tweak)
    tweak(c);
  check_kernel(compile(c.build(), Target::host(), options), c);
}

Graph plain(std::int64_t dh, std::int64_t lq = 0) {
  Graph g("plain_dh" + std::to_string(dh) + "_lq" + std::to_string(lq));
  auto [q, k, v] = inputs(g, 2, 2, dh, lq);
  g.output("o", attention(q, k, v).value());
  return g;
}

// Lengths: fewer queries than a vector (1, 3, 4, 5), one partial query tile (17),
// exactly one tile (64), one past (65), several tiles with a remainder (130); keys past
// one key tile (97, 300) and far fewer keys than queries.
const std::vector<DB> kEdges = {
    {{"B", 1}, {"L", 1}, {"S", 1}},    {{"B", 2}, {"L", 3}, {"S", 300}},
    {{"B", 1}, {"L", 17}, {"S", 17}},  {{"B", 1}, {"L", 64}, {"S", 97}},
    {{"B", 1}, {"L", 65}, {"S", 96}},  {{"B", 1}, {"L", 130}, {"S", 5}},
    {{"B", 1}, {"L", 4}, {"S", 1000}}, {{"B", 1}, {"L", 5}, {"S", 200}}};

class HeadDim : public ::testing::TestWithParam<std::int64_t> {};

TEST_P(HeadDim, EveryTileEdgeMatchesInterpreter) {
  std::int64_t dh = GetParam();
  check(
      "plain", [dh] { return plain(dh); }, kEdges);
  // The tiled kernel for every length but 1 (the default gives the shortest to decode).
  CompileOptions tiled;
  tiled.schedule.decode_rows = 1;
  check(
      "plain_tiled", [dh] { return plain(dh); }, kEdges, tiled);
}

// The decode kernel: 1, 3, 4 and 7 queries (static; rows in whole groups that share the
// loads and the rest one by one, FlashDecode.cpp's rowGroup), keys below, at and past a
// split.
TEST_P(HeadDim, DecodeKernelMatchesInterpreter) {
  std::int64_t dh = GetParam();
  for (std::int64_t lq : {1, 3, 4, 7})
    check("decode_lq" + std::to_string(lq), [dh, lq] { return plain(dh, lq); },
          {{{"B", 1}, {"S", 1}}, {{"B", 2}, {"S", 300}}, {{"B", 1}, {"S", 1000}}});
}

// 40: the decode kernel's query rows held in registers end in a masked vector.
INSTANTIATE_TEST_SUITE_P(Flash, HeadDim, ::testing::Values(32, 40, 64, 80, 96, 128, 256),
                         [](const auto &info) { return "dh" + std::to_string(info.param); });

// With AVX2's 16 registers on any host: at Dh 40 to 128 two rows' outputs do not fit beside
// a value row, so groups of four rows take their values in passes over column slices (4
// queries: one group; 7: a group and three rows one by one; Dh 100 ends in a masked
// vector, alone in the last slice).
TEST(Flash, DecodeValuePassesMatchInterpreter) {
  CompileOptions avx2;
  avx2.schedule.vector_bits = 256;
  for (std::int64_t dh : {40, 100, 128})
    for (std::int64_t lq : {4, 7})
      check(
          "decode_256_dh" + std::to_string(dh) + "_lq" + std::to_string(lq),
          [dh, lq] { return plain(dh, lq); }, {{{"B", 2}, {"S", 300}}}, avx2);
  // The same with AVX-512's 32 registers at Dh 200 (13 vectors; 3 passes, the last slice
  // ending in a masked vector); LLVM splits the vectors on hosts without AVX-512.
  CompileOptions avx512;
  avx512.schedule.vector_bits = 512;
  check(
      "decode_512_dh200_lq7", [] { return plain(200, 7); }, {{{"B", 2}, {"S", 300}}}, avx512);
}

TEST(Flash, DynamicHeadDim) {
  check("dynamic_dh",
        [] {
          Graph g("dyn_dh");
          Dim L = g.dim("L"), S = g.dim("S"), Dh = g.dim("Dh");
          Value q = g.input("q", DType::F32, {L, Dh}), k = g.input("k", DType::F32, {S, Dh}),
                v = g.input("v", DType::F32, {S, Dh});
          g.output("o", attention(q, k, v).value());
          return g;
        },
        {{{"L", 1}, {"S", 40}, {"Dh", 17}},
         {{"L", 2}, {"S", 500}, {"Dh", 80}},
         {{"L", 70}, {"S", 100}, {"Dh", 3}},
         {{"L", 33}, {"S", 9}, {"Dh", 130}}});
}

template <class Mask> Graph masked(const std::string &name, Mask mask, std::int64_t lq = 0) {
  Graph g(name);
  auto [q, k, v] = inputs(g, 2, 2, 16, lq);
  g.output("o", attention(q, k, v).mask(mask).value());
  return g;
}

TEST(Flash, CausalAndWindowOverManyTiles) {
  std::vector<DB> shapes = {{{"B", 1}, {"L", 300}, {"S", 300}},
                            {{"B", 2}, {"L", 3}, {"S", 3}},
                            {{"B", 1}, {"L", 129}, {"S", 400}}};
  check(
      "causal", [] { return masked("causal", causal_mask()); }, shapes);
  check(
      "window", [] { return masked("window", sliding_window_mask(50)); }, shapes);
  check("causal_bottom_right",
        [] {
          return masked("bottom_right", [](auto, auto, auto qi, auto ki) {
            return qi + (len_kv() - len_q()) >= ki;
          });
        },
        {{{"B", 1}, {"L", 40}, {"S", 300}}, {{"B", 1}, {"L", 2}, {"S", 700}}});
}

TEST(Flash, FullyMaskedRowsAndTiles) {
  std::vector<DB> shapes = {{{"B", 1}, {"L", 200}, {"S", 250}}, {{"B", 1}, {"L", 2}, {"S", 600}}};
  // The decode kernel (2 queries): tiles and whole splits masked, rows with nothing.
  std::vector<DB> decode = {{{"B", 1}, {"S", 600}}, {{"B", 2}, {"S", 110}}};
  check(
      "decode_band",
      [] {
        return masked(
            "decode_band", [](auto, auto, auto, auto ki) { return ki >= 100 && ki < 120; }, 2);
      },
      decode);
  check(
      "decode_odd_rows_empty",
      [] {
        return masked(
            "decode_odd_rows", [](auto, auto, auto qi, auto ki) { return qi % 2 == 0 && ki <= qi; },
            2);
      },
      decode);
  // Whole key tiles masked: only keys in [100, 120) are visible.
  check(
      "band",
      [] {
        return masked("band", [](auto, auto, auto, auto ki) { return ki >= 100 && ki < 120; });
      },
      shapes);
  // Rows with nothing visible give 0: odd queries see nothing.
  check(
      "odd_rows_empty",
      [] {
        return masked("odd_rows",
                      [](auto, auto, auto qi, auto ki) { return qi % 2 == 0 && ki <= qi; });
      },
      shapes);
  // Everything masked.
  check(
      "nothing", [] { return masked("nothing", [](auto, auto, auto qi, auto) { return qi < 0; }); },
      shapes, {}, [](DiffCase &c) { c.may_be_zero(); });
}

TEST(Flash, MasksOverOtherIntegerTypes) {
  // to_float(q) > -1 canonicalizes to a compare of i64 casts: the tile classifier must
  // follow the casts (it once compared an index interval with an i64 constant).
  check("i64_compare",
        [] {
          return masked("i64_compare", [](auto, auto, auto qi, auto ki) {
            return to_float(qi) > -1.0 && to_float(ki % 5) < 3.0;
          });
        },
        {{{"B", 1}, {"L", 70}, {"S", 90}}, {{"B", 1}, {"L", 1}, {"S", 300}}});
}

TEST(Flash, DecodeWithGqaModsAndGathers) {
  // 8 query heads on 2 kv heads, ALiBi and a document mask read from a captured tensor
  // (a gather over keys in the decode kernel, over queries in the tiled one).
  auto build = [](std::int64_t lq) {
    return [lq] {
      Graph g("decode_gqa_lq" + std::to_string(lq));
      auto [q, k, v] = inputs(g, 8, 2, 32, lq);
      Value slopes = g.param("slopes", DType::F32, {g.dim("H", 8)});
      Value doc = g.input("doc", DType::I32, {g.dim("S")});
      g.output("o", attention(q, k, v)
                        .mask([&](auto, auto, auto qi, auto ki) { return doc[ki] <= doc[qi]; })
                        .score_mod([&](auto s, auto, auto h, auto qi, auto ki) {
                          return s + slopes[h] * (ki - qi);
                        })
                        .value());
      return g;
    };
  };
  check("decode_gqa_lq1", build(1), {{{"B", 1}, {"S", 1000}}, {{"B", 2}, {"S", 5}}});
  check("decode_gqa_lq4", build(4), {{{"B", 2}, {"S", 333}}});
  check("tiled_gqa", build(0),
        {{{"B", 2}, {"L", 4}, {"S", 333}}, {{"B", 1}, {"L", 70}, {"S", 150}}});
  // A softcap gives -inf scores a finite value: the decode kernel's lanes past the keys
  // must stay out of the softmax.
  check("decode_softcap",
        [] {
          Graph g("decode_softcap");
          auto [q, k, v] = inputs(g, 2, 2, 16, 2);
          g.output("o", attention(q, k, v)
                            .score_mod(
                                [](auto s, auto, auto, auto, auto) { return 3.0 * tanh(s / 3.0); })
                            .value());
          return g;
        },
        {{{"B", 1}, {"S", 3}}, {{"B", 2}, {"S", 77}}});
}

TEST(Flash, LargeScoresStayStable) {
  // Scores in the hundreds: without the running max, exp overflows.
  auto build = [] {
    Graph g("large");
    auto [q, k, v] = inputs(g, 2, 2, 16);
    g.output("o", attention(q, k, v).scale(40.0).mask(causal_mask()).value());
    return g;
  };
  // Scores up to 40 * 16 = 640: that is M in the tolerance rule.
  check("large", build, {{{"B", 1}, {"L", 150}, {"S", 150}}, {{"B", 1}, {"L", 1}, {"S", 700}}}, {},
        [](DiffCase &c) {
          c.sums({"Dh", "S"}, 640);
        });
  check(
      "decode_large",
      [] {
        Graph g("decode_large");
        auto [q, k, v] = inputs(g, 2, 2, 16, 1);
        g.output("o", attention(q, k, v).scale(40.0).value());
        return g;
      },
      {{{"B", 1}, {"S", 700}}}, {},
      [](DiffCase &c) {
        c.sums({"Dh", "S"}, 640);
      });
}

TEST(Flash, F64) {
  auto build = [] {
    Graph g("f64");
    Dim L = g.dim("L"), S = g.dim("S"), Dh = g.dim("Dh", 24);
    Value q = g.input("q", DType::F64, {L, Dh}), k = g.input("k", DType::F64, {S, Dh}),
          v = g.input("v", DType::F64, {S, Dh});
    g.output("o", attention(q, k, v).mask(causal_mask()).value());
    return g;
  };
  // f64 all the way, exp2 by a degree-12 polynomial: held to f64's epsilon.
  check("f64", build, {{{"L", 1}, {"S", 400}}, {{"L", 77}, {"S", 77}}});
  check("f64_decode",
        [] {
          Graph g("f64_decode");
          Dim L = g.dim("L", 3), S = g.dim("S"), Dh = g.dim("Dh", 24);
          Value q = g.input("q", DType::F64, {L, Dh}), k = g.input("k", DType::F64, {S, Dh}),
                v = g.input("v", DType::F64, {S, Dh});
          g.output("o", attention(q, k, v).mask(causal_mask()).value());
          return g;
        },
        {{{"S", 400}}});
}

TEST(Flash, EveryScheduleAgrees) {
  auto build = [] {
    Graph g("sched");
    auto [q, k, v] = inputs(g, 2, 1, 24);
    g.output("o", attention(q, k, v).mask(sliding_window_mask(37)).value());
    return g;
  };
  auto decode = [] {
    Graph g("sched_decode");
    auto [q, k, v] = inputs(g, 2, 1, 24, 2);
    g.output("o", attention(q, k, v).mask(sliding_window_mask(37)).value());
    return g;
  };
  std::vector<DB> shapes = {{{"B", 1}, {"L", 150}, {"S", 150}},
                            {{"B", 2}, {"L", 2}, {"S", 600}},
                            {{"B", 1}, {"L", 9}, {"S", 9}}};
  for (int threads : {1, 2})
    for (auto [qt, kt] : {std::pair{16, 7}, {32, 48}, {128, 200}, {0, 0}})
      for (int bits : {0, 256}) {
        CompileOptions o;
        o.schedule.threads = threads;
        o.schedule.q_tile = qt;
        o.schedule.kv_tile = kt;
        o.schedule.vector_bits = bits;
        std::string name = "threads=" + std::to_string(threads) + " q_tile=" + std::to_string(qt) +
                           " kv_tile=" + std::to_string(kt) +
                           " vector_bits=" + std::to_string(bits);
        check(name, build, shapes, o);
        check(name + " decode", decode, {{{"B", 2}, {"S", 600}}, {{"B", 1}, {"S", 9}}}, o);
      }
}

TEST(Flash, HeadsReadAndWrittenInPlace) {
  // split_heads feeding attention and merge_heads after it: the kernel reads and writes
  // the unsplit tensors directly. Rank 3 (no batch) and rank 4, with GQA.
  check(
      "rank3",
      [] {
        Graph g("heads3");
        Dim L = g.dim("L"), D = g.dim("D", 24), H = g.dim("H", 3), Dh = g.dim("Dh", 8);
        Value x = g.input("x", DType::F32, {L, D});
        Value q = split_heads(x, H, Dh);
        g.output("o", merge_heads(attention(q, q, q).mask(causal_mask()).value(), D));
        return g;
      },
      {{{"L", 1}}, {{"L", 3}}, {{"L", 70}}}, {},
      [](DiffCase &c) {
        c.sums({"Dh", "L"});
      });
  check("rank4_gqa",
        [] {
          Graph g("heads4");
          Dim B = g.dim("B"), L = g.dim("L"), D = g.dim("D", 32), H = g.dim("H", 4);
          Dim Hk = g.dim("Hkv", 2), Dh = g.dim("Dh", 8), Dk = g.dim("Dk", 16);
          Value x = g.input("x", DType::F32, {B, L, D});
          Value kv = g.input("kv", DType::F32, {B, g.dim("S"), Dk});
          Value o =
              attention(split_heads(x, H, Dh), split_heads(kv, Hk, Dh), split_heads(kv, Hk, Dh))
                  .value();
          g.output("o", merge_heads(o, D));
          g.output("o_split", o); // a second user: the heads are not merged in place here
          return g;
        },
        {{{"B", 2}, {"L", 2}, {"S", 300}}, {{"B", 1}, {"L", 67}, {"S", 65}}});
}

/// The calls of `k` so far that ran `schedule` of its attention ("decode", "tiled(q=16)").
std::int64_t runs(const Kernel &k, const std::string &schedule) {
  for (const auto &[name, n] : k.schedule_runs())
    if (name.ends_with(":" + schedule))
      return n;
  ADD_FAILURE() << "no schedule " << schedule;
  return -1;
}

TEST(Flash, ScheduleChosenPerCall) {
  // A dynamic query length: at most decode_rows queries take the decode kernel, more the
  // tiled one, on each call of the same kernel. Both at the threshold's edges, GQA, a
  // document mask gathered from a tensor, keys not a multiple of any tile or split.
  auto build = [] {
    Graph g("per_call");
    auto [q, k, v] = inputs(g, 4, 2, 32);
    Value doc = g.input("doc", DType::I32, {g.dim("S")});
    g.output("o", attention(q, k, v)
                      .mask([&](auto, auto, auto qi, auto ki) { return doc[ki] <= doc[qi] + 1; })
                      .value());
    return g;
  };
  CompileOptions o;
  o.schedule.decode_rows = 5;
  o.schedule.q_tile = 16;
  Kernel k = compile(build(), Target::host(), o);
  ASSERT_EQ(k.schedule_runs().size(), 2u); // a mask: no shorter tiles for short lengths
  for (auto [l, schedule] : {std::pair<std::int64_t, const char *>{4, "decode"},
                             {5, "decode"}, {6, "tiled(q=16)"}, {1, "decode"}, {40, "tiled(q=16)"}}) {
    std::int64_t before = runs(k, schedule);
    TensorMap in = random_inputs(k.graph(), {{"B", 2}, {"L", l}, {"S", 301}}, 7);
    k.run(in);
    EXPECT_EQ(runs(k, schedule), before + 1) << "L = " << l << " did not run " << schedule;
  }
  check("per_call", build,
        {{{"B", 2}, {"L", 4}, {"S", 301}}, {{"B", 2}, {"L", 5}, {"S", 301}},
         {{"B", 1}, {"L", 6}, {"S", 301}}, {{"B", 1}, {"L", 1}, {"S", 3}}},
        o);
  // By default one vector of f32 queries takes the decode kernel, at most 8 of them:
  // with wider vectors, tiles of one vector take the lengths from 9 up to one vector.
  // Without a mask, up to two vectors take tiles of two vectors, more the default tiles
  // of four.
  Kernel dflt = compile(plain(32));
  std::int64_t lanes = host_vector_bits() / 32;
  std::string one = "tiled(q=" + std::to_string(lanes) + ")";
  std::string two = "tiled(q=" + std::to_string(2 * lanes) + ")";
  std::string four = "tiled(q=" + std::to_string(4 * lanes) + ")";
  std::vector<std::pair<std::int64_t, std::string>> edges = {
      {lanes + 1, two}, {2 * lanes, two}, {2 * lanes + 1, four}};
  if (lanes > 8)
    edges.insert(edges.end(), {{8, "decode"}, {9, one}, {lanes, one}});
  else
    edges.push_back({lanes, "decode"});
  ASSERT_EQ(dflt.schedule_runs().size(), lanes > 8 ? 4u : 3u);
  for (const auto &[l, schedule] : edges) {
    std::int64_t before = runs(dflt, schedule);
    dflt.run(random_inputs(dflt.graph(), {{"B", 1}, {"L", l}, {"S", 50}}, 8));
    EXPECT_EQ(runs(dflt, schedule), before + 1) << "L = " << l << " did not run " << schedule;
  }
  check("plain_short_tiles", [] { return plain(32); },
        {{{"B", 2}, {"L", lanes + 1}, {"S", 301}}, {{"B", 1}, {"L", 2 * lanes}, {"S", 7}},
         {{"B", 2}, {"L", 9}, {"S", 301}}, {{"B", 1}, {"L", lanes}, {"S", 300}}});
  // A mask that never reads the query position (padding, lengths from a tensor) has the
  // same kernels as no mask, each at its edges, partial key tiles included.
  auto padded = [] {
    Graph g("padded");
    auto [q, k, v] = inputs(g, 2, 2, 32);
    Value len = g.input("len", DType::I32, {g.dim("B")});
    g.output(
        "o",
        attention(q, k, v).mask([&](auto b, auto, auto, auto ki) { return ki < len[b]; }).value());
    return g;
  };
  Kernel pad = compile(padded());
  ASSERT_EQ(pad.schedule_runs().size(), dflt.schedule_runs().size());
  for (const auto &[l, schedule] : edges) {
    std::int64_t before = runs(pad, schedule);
    pad.run(random_inputs(pad.graph(), {{"B", 1}, {"L", l}, {"S", 50}}, 9));
    EXPECT_EQ(runs(pad, schedule), before + 1) << "L = " << l << " did not run " << schedule;
  }
  check("padded", padded,
        {{{"B", 2}, {"L", 8}, {"S", 301}}, {{"B", 2}, {"L", lanes + 1}, {"S", 301}},
         {{"B", 2}, {"L", 2 * lanes + 1}, {"S", 150}}, {{"B", 1}, {"L", 9}, {"S", 70}}},
        {}, [](DiffCase &c) {
          c.inputs([](TensorMap &in) {
            Tensor &len = in.at("len");
            std::int64_t s = in.at("k").shape()[2];
            for (std::int64_t b = 0; b < len.numel(); ++b)
              len.set(b, static_cast<double>((b + 1) * s / 3 + 1)); // a third, two thirds
          });
        });
}

/// Document ids that run in blocks of random lengths up to `longest` (sorted: packed
/// documents; in descending order when `descending`), or random ones when `longest` is 0,
/// for every row of `doc`.
void document_ids(Tensor &doc, std::int64_t longest, std::uint64_t seed, bool descending = false) {
  std::int64_t len = doc.shape().back(), rows = doc.numel() / std::max<std::int64_t>(len, 1);
  std::uint64_t x = seed;
  auto next = [&] { return x = x * 6364136223846793005ULL + 1442695040888963407ULL, x >> 33; };
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t i = 0, id = 0, end = 0; i < len; ++i) {
      if (longest == 0)
        id = static_cast<std::int64_t>(next() % 3);
      else if (i == end)
        end += 1 + static_cast<std::int64_t>(next() % longest), ++id;
      doc.set(r * len + i, static_cast<double>(descending ? -id : id));
    }
}

/// Masks that read tensors at a range of positions: the kernel classifies each tile from
/// this call's values (range tables) and matches the interpreter, with tiles empty, full
/// and partly kept, on one kernel and several inputs.
TEST(Flash, BlockMapsFromTheData) {
  auto packed = [] {
    Graph g("packed_docs");
    auto [q, k, v] = inputs(g, 2, 2, 16);
    Value doc = g.input("doc", DType::I32, {g.dim("B"), g.dim("L")});
    g.output("o", attention(q, k, v)
                      .mask([&](auto b, auto, auto qi, auto ki) {
                        return ki <= qi && doc(b, qi) == doc(b, ki);
                      })
                      .value());
    return g;
  };
  // Tiles of 24 queries and 12 keys: no range is a power of two long, so each bound
  // takes two runs of the tables (groups of 8 key tiles: 96 keys).
  CompileOptions o;
  o.schedule.q_tile = 24;
  o.schedule.kv_tile = 12;
  Kernel packedKernel = compile(packed(), Target::host(), o);
  for (std::int64_t longest : {0, 5, 40, 300})
    for (bool descending : {false, true}) {
      DiffCase c;
      c.name = "packed_docs_" + std::to_string(longest) + (descending ? "_descending" : "");
      c.build = packed;
      c.shapes = {{{"B", 2}, {"L", 300}, {"S", 300}}, {{"B", 1}, {"L", 37}, {"S", 37}}};
      c.sums({"Dh", "S"});
      c.inputs([=](TensorMap &in) { document_ids(in.at("doc"), longest, 11, descending); });
      check_kernel(packedKernel, c);
    }
  // Keys from a 1-D table at an offset, a per-sequence prefix and padding (point loads).
  auto mixed = [] {
    Graph g("prefix_pad");
    auto [q, k, v] = inputs(g, 2, 2, 16);
    Value seg = g.input("seg", DType::I64, {g.dim("S")});
    Value prefix = g.input("prefix", DType::I32, {g.dim("B")});
    Value len = g.input("len", DType::I32, {g.dim("B")});
    g.output("o", attention(q, k, v)
                      .mask([&](auto b, auto, auto qi, auto ki) {
                        return (ki <= qi || ki < prefix[b]) && ki < len[b] &&
                               seg[min(ki + 1, len_kv() - 1)] >= seg[ki] - 1;
                      })
                      .value());
    return g;
  };
  DiffCase c;
  c.name = "prefix_pad";
  c.build = mixed;
  c.shapes = {{{"B", 3}, {"L", 70}, {"S", 70}}};
  c.sums({"Dh", "S"});
  c.inputs([](TensorMap &in) {
    in["prefix"] = Tensor::from_values(DType::I32, {3}, {0, 20, 70});
    in["len"] = Tensor::from_values(DType::I32, {3}, {70, 33, 1});
    document_ids(in.at("seg"), 9, 3);
  });
  check_kernel(compile(c.build(), Target::host(), o), c);
}

/// The tiles a call skips follow the tensor it reads: the same kernel on the same shape
/// skips more tiles when the documents are shorter, and what it skips matches a count of
/// the tiles that hold no kept pair.
TEST(Flash, TileCountsFollowTheData) {
  Graph g("docs");
  auto [q, k, v] = inputs(g, 1, 1, 16);
  Value doc = g.input("doc", DType::I32, {g.dim("S")});
  g.output("o", attention(q, k, v)
                    .mask([&](auto, auto, auto qi, auto ki) { return doc[qi] == doc[ki]; })
                    .value());
  // Tiles of 8 x 8 on any host: 8 queries are one vector of 256 bits (with 512-bit
  // vectors a tile holds at least 16).
  CompileOptions o;
  o.schedule.vector_bits = 256;
  o.schedule.q_tile = 8;
  o.schedule.kv_tile = 8;
  o.schedule.decode_rows = 1;
  Kernel kern = compile(g, Target::host(), o);
  std::int64_t n = 128;
  auto run = [&](auto id) {
    TensorMap in = random_inputs(g, {{"B", 1}, {"L", n}, {"S", n}}, 4);
    for (std::int64_t i = 0; i < n; ++i)
      in.at("doc").set(i, static_cast<double>(id(i)));
    TileCounts before = kern.tile_counts().at(0);
    kern.run(in);
    TileCounts after = kern.tile_counts().at(0);
    return TileCounts{after.attention, after.tiles - before.tiles,
                      after.computed - before.computed, after.full - before.full};
  };
  TileCounts one = run([](std::int64_t) { return 7; });
  EXPECT_EQ(one.tiles, 16 * 16);
  EXPECT_EQ(one.empty(), 0);
  EXPECT_EQ(one.full, 16 * 16) << "one document: no tile needs the mask";
  // Documents of 16 positions, two tiles each: the diagonal's 2x2 blocks are kept whole.
  TileCounts docs16 = run([](std::int64_t i) { return i / 16; });
  EXPECT_EQ(docs16.tiles, 16 * 16);
  EXPECT_EQ(docs16.full, 8 * 4);
  EXPECT_EQ(docs16.empty(), 16 * 16 - 8 * 4);
  // Documents of 12: tiles across a boundary are partial, those within one full.
  TileCounts docs12 = run([](std::int64_t i) { return i / 12; });
  std::int64_t kept = 0, whole = 0;
  for (std::int64_t r = 0; r < 16; ++r)
    for (std::int64_t c = 0; c < 16; ++c) {
      std::int64_t lo = std::max(r * 8 / 12, c * 8 / 12), hi = std::min((r * 8 + 7) / 12, (c * 8 + 7) / 12);
      kept += lo <= hi;
      whole += r * 8 / 12 == (r * 8 + 7) / 12 && c * 8 / 12 == (c * 8 + 7) / 12 && r * 8 / 12 == c * 8 / 12;
    }
  EXPECT_EQ(docs12.computed, kept);
  EXPECT_EQ(docs12.full, whole);
}

TEST(Flash, BadScheduleIsAnError) {
  CompileOptions o;
  o.schedule.vector_bits = 300;
  try {
    compile(plain(16), Target::host(), o);
    FAIL() << "vector_bits=300 was accepted";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("vector_bits must be"), std::string::npos) << e.what();
  }
  o = CompileOptions{};
  o.schedule.threads = -1;
  try {
    compile(plain(16), Target::host(), o);
    FAIL() << "threads=-1 was accepted";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("threads"), std::string::npos) << e.what();
  }
  o = CompileOptions{};
  o.schedule.decode_rows = -2;
  try {
    compile(plain(16), Target::host(), o);
    FAIL() << "decode_rows=-2 was accepted";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("decode_rows must be"), std::string::npos) << e.what();
  }
}

} // namespace
} // namespace qkv::test
