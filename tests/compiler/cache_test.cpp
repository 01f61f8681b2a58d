// KV-cache views (cache_view, paged_cache_view) and rope at given positions, compiled
// against the interpreter: materialised on their own, and read in place by attention.
#include "differential.hpp"

namespace qkv::test {
namespace {

using DB = DimBindings;

/// Lengths of the cached prefix per sequence, in [0, rows], rows read from input
/// `store` dim 2 (times the table's width for a paged cache).
void set_lengths(TensorMap &in, std::int64_t rows, std::uint64_t salt = 0) {
  Tensor &t = in.at("len");
  for (std::int64_t b = 0; b < t.numel(); ++b)
    t.set(b, static_cast<double>((static_cast<std::uint64_t>(b) * 7 + 3 + salt) % (rows + 1)));
}

struct Cache {
  Value past_k, past_v, len, k_new, v_new, q;
};

/// q (B, H, n, Dh), a contiguous cache (B, Hkv, C, Dh) and this step's rows (B, Hkv, n, Dh).
Cache contiguous(Graph &g, std::int64_t h, std::int64_t hkv, std::int64_t dh, std::int64_t n) {
  Dim B = g.dim("B"), C = g.dim("C"), N = n ? g.dim("n", n) : g.dim("n");
  Dim H = g.dim("H", h), Hk = hkv == h ? H : g.dim("Hkv", hkv), Dh = g.dim("Dh", dh);
  Cache c;
  c.past_k = g.input("past_k", DType::F32, {B, Hk, C, Dh});
  c.past_v = g.input("past_v", DType::F32, {B, Hk, C, Dh});
  c.len = g.input("len", DType::I64, {B});
  c.k_new = g.input("k_new", DType::F32, {B, Hk, N, Dh});
  c.v_new = g.input("v_new", DType::F32, {B, Hk, N, Dh});
  c.q = g.input("q", DType::F32, {B, H, N, Dh});
  return c;
}

TEST(CacheView, MaterialisedMatchesInterpreter) {
  DiffCase c = one_output("cache_view",
                          [](Graph &g) {
                            Cache k = contiguous(g, 2, 2, 8, 0);
                            return cache_view(k.past_k, k.len, k.k_new);
                          },
                          {{{"B", 1}, {"C", 1}, {"n", 1}}, {{"B", 3}, {"C", 9}, {"n", 2}}});
  c.inputs([](TensorMap &in) { set_lengths(in, in.at("past_k").shape()[2]); }).may_be_zero();
  run_differential(c);
}

/// Attention of n new queries over a contiguous cache view: decode kernel for a static n
/// of at most 4, tiled kernel for a dynamic n.
DiffCase cached_attention(std::string name, std::int64_t h, std::int64_t hkv, std::int64_t n,
                          std::vector<DB> shapes) {
  DiffCase c;
  c.name = name;
  c.build = [=] {
    Graph g(name);
    Cache k = contiguous(g, h, hkv, 16, n);
    Value kk = cache_view(k.past_k, k.len, k.k_new), vv = cache_view(k.past_v, k.len, k.v_new);
    g.output("o", attention(k.q, kk, vv).mask(cache_mask(k.len)).value());
    return g;
  };
  c.shapes = std::move(shapes);
  c.sums({"Dh", "C", "n"});
  c.inputs([](TensorMap &in) { set_lengths(in, in.at("past_k").shape()[2]); });
  return c;
}

TEST(CacheView, DecodeStepReadsTheCacheInPlace) {
  run_differential(
      cached_attention("decode_n1", 4, 2, 1,
                       {{{"B", 1}, {"C", 1}}, {{"B", 3}, {"C", 100}}, {{"B", 2}, {"C", 700}}}));
  run_differential(cached_attention("decode_n3", 2, 2, 3, {{{"B", 3}, {"C", 300}}}));
}

TEST(CacheView, PrefillOverACacheReadsItInPlace) {
  run_differential(cached_attention("prefill", 4, 1, 0,
                                    {{{"B", 2}, {"C", 50}, {"n", 70}},
                                     {{"B", 3}, {"C", 129}, {"n", 5}},
                                     {{"B", 1}, {"C", 0}, {"n", 17}}}));
}

TEST(CacheView, PagedCacheThroughItsBlockTable) {
  for (std::int64_t n : {1, 0}) {
    DiffCase c;
    c.name = n ? "paged_decode" : "paged_prefill";
    c.build = [n, name = c.name] {
      Graph g(name);
      Dim B = g.dim("B"), P = g.dim("P"), M = g.dim("M"), page = g.dim("page", 4);
      Dim N = n ? g.dim("n", n) : g.dim("n");
      Dim H = g.dim("H", 4), Hk = g.dim("Hkv", 2), Dh = g.dim("Dh", 16);
      Value pool_k = g.input("pool_k", DType::F32, {P, Hk, page, Dh});
      Value pool_v = g.input("pool_v", DType::F32, {P, Hk, page, Dh});
      Value table = g.input("table", DType::I32, {B, M});
      Value len = g.input("len", DType::I64, {B});
      Value kn = g.input("k_new", DType::F32, {B, Hk, N, Dh});
      Value vn = g.input("v_new", DType::F32, {B, Hk, N, Dh});
      Value q = g.input("q", DType::F32, {B, H, N, Dh});
      Value kk = paged_cache_view(pool_k, table, len, kn);
      Value vv = paged_cache_view(pool_v, table, len, vn);
      g.output("o", attention(q, kk, vv).mask(cache_mask(len)).value());
      return g;
    };
    c.shapes = n ? std::vector<DB>{{{"B", 3}, {"P", 40}, {"M", 10}}, {{"B", 1}, {"P", 3}, {"M", 2}}}
                 : std::vector<DB>{{{"B", 2}, {"P", 30}, {"M", 12}, {"n", 33}}};
    c.sums({"Dh", "M", "n"}, 4);
    c.inputs([](TensorMap &in) {
      // Every sequence's pages are distinct pages of the pool, scattered.
      Tensor &table = in.at("table");
      std::int64_t pages = in.at("pool_k").shape()[0], m = table.shape()[1];
      for (std::int64_t i = 0; i < table.numel(); ++i)
        table.set(i, static_cast<double>((i * 7 + 1) % pages));
      set_lengths(in, m * 4, 1);
    });
    run_differential(c);
  }
}

/// Attention without a mask of a dynamic count of queries over a cache view (contiguous,
/// or paged with 4 rows a page): 7 to 32 queries take the short query tiles, which
/// prefetch the rows the next products read, each within its segment.
Graph unmasked_over_cache(bool paged) {
  Graph g(paged ? "short_tiles_paged" : "short_tiles_cache");
  Dim B = g.dim("B"), N = g.dim("n"), H = g.dim("H", 2), Dh = g.dim("Dh", 40);
  Value len = g.input("len", DType::I64, {B});
  Value kn = g.input("k_new", DType::F32, {B, H, N, Dh}),
        vn = g.input("v_new", DType::F32, {B, H, N, Dh});
  Value q = g.input("q", DType::F32, {B, H, N, Dh});
  Value kk, vv;
  if (paged) {
    Dim P = g.dim("P"), M = g.dim("M"), page = g.dim("page", 4);
    Value table = g.input("table", DType::I32, {B, M});
    kk = paged_cache_view(g.input("pool_k", DType::F32, {P, H, page, Dh}), table, len, kn);
    vv = paged_cache_view(g.input("pool_v", DType::F32, {P, H, page, Dh}), table, len, vn);
  } else {
    Dim C = g.dim("C");
    kk = cache_view(g.input("past_k", DType::F32, {B, H, C, Dh}), len, kn);
    vv = cache_view(g.input("past_v", DType::F32, {B, H, C, Dh}), len, vn);
  }
  g.output("o", attention(q, kk, vv).value());
  return g;
}

TEST(CacheView, ShortQueryTilesPrefetchWithinEachSegment) {
  // Stored rows over several key tiles of 256 (up to 599), a tile cut short by the stored
  // segment's end, this step's rows after them, then the cache's zero rows.
  for (bool paged : {false, true}) {
    DiffCase c;
    c.name = paged ? "short_tiles_paged" : "short_tiles_cache";
    c.build = [paged] { return unmasked_over_cache(paged); };
    c.shapes = paged ? std::vector<DB>{{{"B", 2}, {"P", 320}, {"M", 150}, {"n", 7}},
                                       {{"B", 1}, {"P", 160}, {"M", 150}, {"n", 20}}}
                     : std::vector<DB>{{{"B", 2}, {"C", 600}, {"n", 16}},
                                       {{"B", 1}, {"C", 530}, {"n", 9}},
                                       {{"B", 2}, {"C", 300}, {"n", 32}}};
    c.sums(paged ? std::vector<std::string>{"Dh", "M", "n"}
                 : std::vector<std::string>{"Dh", "C", "n"},
           4);
    c.inputs([paged](TensorMap &in) {
      std::int64_t rows = paged ? in.at("table").shape()[1] * 4 : in.at("past_k").shape()[2];
      Tensor &len = in.at("len");
      for (std::int64_t b = 0; b < len.numel(); ++b)
        len.set(b, static_cast<double>(rows - 1 - 37 * b));
      if (paged) { // every sequence's pages distinct, scattered over the pool
        Tensor &table = in.at("table");
        std::int64_t pages = in.at("pool_k").shape()[0];
        for (std::int64_t i = 0; i < table.numel(); ++i)
          table.set(i, static_cast<double>((i * 7 + 1) % pages));
      }
    });
    run_differential(c);
  }
  if (host_vector_bits() < 512)
    return; // tiles of one vector of 16 f32 queries: AVX-512
  Kernel k = compile(unmasked_over_cache(false));
  TensorMap in = random_inputs(k.graph(), {{"B", 1}, {"C", 600}, {"n", 16}}, 3);
  in.at("len").set(0, 599.0);
  k.run(in);
  bool ran = false;
  for (const auto &[name, n] : k.schedule_runs())
    ran = ran || (name.ends_with(":tiled(q=16)") && n == 1);
  EXPECT_TRUE(ran) << "16 queries over a cache did not take the tiles of one vector";
}

} // namespace
} // namespace qkv::test

namespace qkv::test {
namespace {

TEST(CacheView, LengthsPastTheCacheAreAnErrorNotARead) {
  Graph g("bad_len");
  Cache k = contiguous(g, 2, 2, 8, 1);
  g.output("o", attention(k.q, cache_view(k.past_k, k.len, k.k_new),
                          cache_view(k.past_v, k.len, k.v_new))
                    .mask(cache_mask(k.len))
                    .value());
  Kernel kern = compile(g);
  TensorMap in = random_inputs(g, {{"B", 2}, {"C", 5}}, 1);
  in.at("len").set(1, 6);
  std::string compiled, interpreted;
  try {
    kern.run(in);
  } catch (const Error &e) {
    compiled = e.what();
  }
  try {
    reference::run(g, in);
  } catch (const Error &e) {
    interpreted = e.what();
  }
  EXPECT_NE(compiled.find("lengths 'len'[1] = 6 is outside [0, 5]"), std::string::npos) << compiled;
  EXPECT_NE(interpreted.find("lengths 'len'[1] = 6 is outside [0, 5]"), std::string::npos)
      << interpreted;
}

TEST(CacheView, ABlockTableEntryOutsideThePoolIsAnError) {
  Graph g("bad_table");
  Dim B = g.dim("B"), P = g.dim("P"), M = g.dim("M"), page = g.dim("page", 4);
  Dim H = g.dim("H", 2), Dh = g.dim("Dh", 8), N = g.dim("n", 1);
  Value pk = g.input("pool_k", DType::F32, {P, H, page, Dh});
  Value table = g.input("table", DType::I32, {B, M});
  Value len = g.input("len", DType::I64, {B});
  Value kn = g.input("k_new", DType::F32, {B, H, N, Dh});
  Value q = g.input("q", DType::F32, {B, H, N, Dh});
  Value kk = paged_cache_view(pk, table, len, kn);
  g.output("o", attention(q, kk, kk).mask(cache_mask(len)).value());
  Kernel kern = compile(g);
  TensorMap in = random_inputs(g, {{"B", 1}, {"P", 3}, {"M", 2}}, 1);
  in.at("len").set(0, 6); // rows 0..5: pages table[0, 0] and table[0, 1]
  in.at("table").set(0, 1);
  in.at("table").set(1, 3); // not a page of a 3-page pool
  std::string e;
  try {
    kern.run(in);
  } catch (const Error &err) {
    e = err.what();
  }
  EXPECT_NE(e.find("table 'table'[0, 1] = 3 is not a page of the pool (3 pages)"),
            std::string::npos)
      << e;
  in.at("len").set(0, 4); // only the first page is in use: the bad entry is never read
  EXPECT_NO_THROW(kern.run(in));
}

TEST(Rope, AtGivenPositionsMatchesInterpreter) {
  DiffCase per_batch =
      one_output("rope_positions_b",
                 [](Graph &g) {
                   Dim B = g.dim("B"), H = g.dim("H", 2), L = g.dim("L"), Dh = g.dim("Dh", 8);
                   Value x = g.input("x", DType::F32, {B, H, L, Dh});
                   return rope(x, g.input("pos", DType::I64, {B, L}), {500, false, 0});
                 },
                 {{{"B", 3}, {"L", 2}}, {{"B", 1}, {"L", 17}}});
  per_batch.inputs([](TensorMap &in) {
    Tensor &p = in.at("pos");
    for (std::int64_t i = 0; i < p.numel(); ++i)
      p.set(i, static_cast<double>(i * 37 % 101));
  });
  per_batch.sums({}, 101); // angles up to 101 radians
  run_differential(per_batch);
  DiffCase shared = one_output("rope_positions",
                               [](Graph &g) {
                                 Dim L = g.dim("L"), Dh = g.dim("Dh", 6);
                                 Value x = g.input("x", DType::F32, {L, Dh});
                                 return rope(x, g.input("pos", DType::I32, {L}), {10000, true, 0});
                               },
                               {{{"L", 5}}});
  shared.inputs([](TensorMap &in) {
    Tensor &p = in.at("pos");
    for (std::int64_t i = 0; i < p.numel(); ++i)
      p.set(i, static_cast<double>(40 - 3 * i));
  });
  shared.sums({}, 40);
  run_differential(shared);
}

} // namespace
} // namespace qkv::test
