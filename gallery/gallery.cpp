// The gallery. Each graph is written the way a user would write it.
#include "gallery.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include <qkv/runtime/kernel.hpp>

namespace qkv::gallery {

namespace {

using Mask = Workload::Mask;

void check_fits(bool ok, const char *graph, const std::string &what) {
  user_check(ok, std::string("graph '") + graph + "': " + what);
}

/// The seed walkthrough (seed 000, "I love GPU programming"), written the seeds' way:
/// three matmuls and a softmax. qkv-recognize-attention turns it into one attention op.
/// Single head, no batch: the model dim is the head dim (6 by default).
Graph seed(const GraphShape &s) {
  check_fits(s.batch == 1 && s.heads == 1 && s.kv_heads == 1, "seed",
             "single head without a batch dim: batch and heads must be 1");
  Graph g("seed");
  Dim L = g.dim("L"), D = g.dim("D", s.head_dim);
  Value x = g.input("x", s.dtype, {L, D});
  Value wq = g.param("wq", s.dtype, {D, D});
  Value wk = g.param("wk", s.dtype, {D, D});
  Value wv = g.param("wv", s.dtype, {D, D});
  Value q = matmul(x, wq).named("Q"), k = matmul(x, wk).named("K"), v = matmul(x, wv).named("V");
  double scale_by = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
  Value scores = scale(matmul(q, transpose(k)), scale_by).named("scaled");
  Value a = softmax(scores).named("A");
  g.output("out", matmul(a, v));
  return g;
}

/// Multi-head attention block: projections, split heads, attention, merge, output. Model
/// dim D = heads * head_dim; k and v have kv_heads heads (GQA when fewer).
Graph mha_like(const char *name, const GraphShape &s, bool causal, bool cross) {
  check_fits(s.heads % s.kv_heads == 0, name,
             "kv_heads (" + std::to_string(s.kv_heads) + ") must divide heads (" +
                 std::to_string(s.heads) + ")");
  Graph g(name);
  Dim B = g.dim("B"), L = g.dim("L"), D = g.dim("D", s.model_dim());
  Dim H = g.dim("H", s.heads), Dh = g.dim("Dh", s.head_dim);
  bool gqa = s.kv_heads != s.heads;
  Dim Hkv = gqa ? g.dim("Hkv", s.kv_heads) : H;
  Value x = g.input("x", s.dtype, {B, L, D});
  Value src = x;
  if (cross) {
    Dim S = g.dim("S");
    src = g.input("memory", s.dtype, {B, S, D});
  }
  Dim KvD = gqa ? product(Hkv, Dh) : D;
  Value wq = g.param("wq", s.dtype, {D, D});
  Value wk = g.param("wk", s.dtype, {D, KvD});
  Value wv = g.param("wv", s.dtype, {D, KvD});
  Value wo = g.param("wo", s.dtype, {D, D});
  Value q = split_heads(linear(x, wq), H, Dh).named("q");
  Value k = split_heads(linear(src, wk), Hkv, Dh).named("k");
  Value v = split_heads(linear(src, wv), Hkv, Dh).named("v");
  Attention att = attention(q, k, v);
  if (causal)
    att.mask(causal_mask());
  Value o = merge_heads(att.value().named("o"), D);
  g.output("y", linear(o, wo));
  return g;
}

/// Attention alone: q (B, H, L, Dh), k and v (B, Hkv, S, Dh) are inputs. Masks are
/// mask_mod expressions. A decode graph has a static query length (L = seq, 1 by default).
Graph attention_only(const char *name, const GraphShape &s, Mask mask, bool decode) {
  check_fits(s.heads % s.kv_heads == 0, name,
             "kv_heads (" + std::to_string(s.kv_heads) + ") must divide heads (" +
                 std::to_string(s.heads) + ")");
  Graph g(name);
  Dim B = g.dim("B"), L = decode ? g.dim("L", s.seq) : g.dim("L"), S = g.dim("S");
  Dim H = g.dim("H", s.heads), Dh = g.dim("Dh", s.head_dim);
  Dim Hkv = s.kv_heads != s.heads ? g.dim("Hkv", s.kv_heads) : H;
  Value q = g.input("q", s.dtype, {B, H, L, Dh});
  Value k = g.input("k", s.dtype, {B, Hkv, S, Dh});
  Value v = g.input("v", s.dtype, {B, Hkv, S, Dh});
  Attention att = attention(q, k, v);
  if (mask == Mask::Causal)
    att.mask([](Expr, Expr, Expr qi, Expr kv) { return qi >= kv; });
  if (mask == Mask::Window)
    att.mask([w = s.window](Expr, Expr, Expr qi, Expr kv) { return qi >= kv && qi - kv < w; });
  g.output("out", att);
  return g;
}

/// One decode step over a KV cache read in place: q (B, H, 1, Dh) and this step's k_new,
/// v_new (B, Hkv, 1, Dh) attend over the cached rows and the new one under cache_mask.
/// The cache is k_past, v_past (B, Hkv, C, Dh) (cache_view), or with s.paged pages of 16
/// rows, k_pool, v_pool (P, Hkv, 16, Dh), that block_table (B, M) names per sequence
/// (paged_cache_view); lengths[b] rows of sequence b are cached. The query length is
/// static, so the compiler picks its split-KV decode kernel.
Graph decode(const GraphShape &s) {
  check_fits(s.heads % s.kv_heads == 0, "decode",
             "kv_heads (" + std::to_string(s.kv_heads) + ") must divide heads (" +
                 std::to_string(s.heads) + ")");
  check_fits(s.seq == 1, "decode",
             "one decode step has one query (L = 1), not " + std::to_string(s.seq) +
                 "; attn_decode takes any static L");
  Graph g(s.paged ? "decode_paged" : "decode");
  Dim B = g.dim("B"), L = g.dim("L", 1);
  Dim H = g.dim("H", s.heads), Dh = g.dim("Dh", s.head_dim);
  Dim Hkv = s.kv_heads != s.heads ? g.dim("Hkv", s.kv_heads) : H;
  Value q = g.input("q", s.dtype, {B, H, L, Dh});
  Value k_new = g.input("k_new", s.dtype, {B, Hkv, L, Dh});
  Value v_new = g.input("v_new", s.dtype, {B, Hkv, L, Dh});
  Value lengths = g.input("lengths", DType::I64, {B});
  Value k, v;
  if (s.paged) {
    Dim P = g.dim("P"), Page = g.dim("page", GraphShape::kPageRows), M = g.dim("M");
    Value table = g.input("block_table", DType::I32, {B, M});
    k = paged_cache_view(g.input("k_pool", s.dtype, {P, Hkv, Page, Dh}), table, lengths, k_new);
    v = paged_cache_view(g.input("v_pool", s.dtype, {P, Hkv, Page, Dh}), table, lengths, v_new);
  } else {
    Dim C = g.dim("C");
    k = cache_view(g.input("k_past", s.dtype, {B, Hkv, C, Dh}), lengths, k_new);
    v = cache_view(g.input("v_past", s.dtype, {B, Hkv, C, Dh}), lengths, v_new);
  }
  g.output("out", attention(q, k, v).mask(cache_mask(lengths)).value());
  return g;
}

/// The decode graph's cache at shape s: every sequence holds S = kv_len rows. Paged, the
/// pages of the sequences are distinct pages of the pool in a fixed shuffled order, so
/// that the block table really redirects each page (no two consecutive entries name
/// consecutive pages by design).
void fill_cache(TensorMap &in, const GraphShape &s) {
  Tensor &lengths = in.at("lengths");
  std::int64_t capacity = s.paged ? in.at("block_table").shape()[1] * GraphShape::kPageRows
                                  : in.at("k_past").shape()[2];
  if (s.kv_len > capacity)
    internal_error("decode: " + std::to_string(s.kv_len) + " cached rows in a cache of " +
                   std::to_string(capacity));
  for (std::int64_t b = 0; b < lengths.numel(); ++b)
    lengths.set(b, static_cast<double>(s.kv_len));
  if (!s.paged)
    return;
  Tensor &table = in.at("block_table");
  std::int64_t pages = in.at("k_pool").shape()[0];
  if (table.numel() > pages)
    internal_error("decode: " + std::to_string(table.numel()) + " table entries for a pool of " +
                   std::to_string(pages) + " pages");
  // Fisher-Yates with splitmix64: the same permutation on every platform.
  std::vector<std::int64_t> perm(static_cast<std::size_t>(pages));
  for (std::int64_t i = 0; i < pages; ++i)
    perm[static_cast<std::size_t>(i)] = i;
  std::uint64_t state = 0x9e3779b97f4a7c15ull;
  auto next = [&state] {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  for (std::int64_t i = pages - 1; i > 0; --i)
    std::swap(perm[static_cast<std::size_t>(i)],
              perm[static_cast<std::size_t>(next() % static_cast<std::uint64_t>(i + 1))]);
  for (std::int64_t i = 0; i < table.numel(); ++i)
    table.set(i, static_cast<double>(perm[static_cast<std::size_t>(i)]));
}

GraphShape shape(std::int64_t batch, std::int64_t heads, std::int64_t kv_heads, std::int64_t seq,
                 std::int64_t kv_len, std::int64_t head_dim) {
  return GraphShape{batch, heads, kv_heads, seq, kv_len, head_dim};
}

void add_blocks(std::vector<Entry> &e) {
  const Workload block{Workload::Form::Block};
  const GraphShape small = shape(2, 4, 4, 16, 16, 16), bench = shape(1, 8, 8, 2048, 2048, 64);
  e.push_back({"seed",
               "the seeds' 4x6 walkthrough written as matmul/softmax/matmul (single head)",
               seed,
               {"L"},
               shape(1, 1, 1, 4, 4, 6),
               shape(1, 1, 1, 4, 4, 6),
               {{{"L", 4}}, {{"L", 1}}, {{"L", 17}}},
               {Workload::Form::Block, Mask::None, false, false}});
  e.push_back({"mha",
               "multi-head self-attention block, B and L dynamic (D=H*Dh=64, H=4, Dh=16)",
               [](const GraphShape &s) { return mha_like("mha", s, false, false); },
               {"B", "L"},
               small,
               bench,
               {{{"B", 2}, {"L", 16}}, {{"B", 1}, {"L", 1}}, {{"B", 3}, {"L", 17}}},
               block});
  e.push_back({"causal",
               "multi-head self-attention with a causal mask_mod (q >= kv)",
               [](const GraphShape &s) { return mha_like("causal", s, true, false); },
               {"B", "L"},
               small,
               bench,
               {{{"B", 2}, {"L", 16}}, {{"B", 1}, {"L", 1}}, {{"B", 1}, {"L", 33}}},
               {Workload::Form::Block, Mask::Causal}});
  e.push_back({"gqa",
               "grouped-query attention: 4 query heads share 2 kv heads",
               [](const GraphShape &s) { return mha_like("gqa", s, false, false); },
               {"B", "L"},
               shape(2, 4, 2, 16, 16, 16),
               shape(1, 8, 2, 2048, 2048, 64),
               {{{"B", 2}, {"L", 16}}, {{"B", 1}, {"L", 1}}, {{"B", 2}, {"L", 9}}},
               block});
  e.push_back({"cross",
               "cross-attention: queries from x (L), keys/values from memory (S)",
               [](const GraphShape &s) { return mha_like("cross", s, false, true); },
               {"B", "L", "S"},
               shape(2, 4, 4, 8, 12, 16),
               bench,
               {{{"B", 2}, {"L", 8}, {"S", 12}},
                {{"B", 1}, {"L", 1}, {"S", 1}},
                {{"B", 1}, {"L", 5}, {"S", 17}}},
               {Workload::Form::Block, Mask::None, true}});
}

void add_attention(std::vector<Entry> &e) {
  const GraphShape small = shape(2, 2, 2, 16, 16, 16), bench = shape(1, 16, 16, 2048, 2048, 64);
  const std::vector<DimBindings> tests = {{{"B", 2}, {"L", 16}, {"S", 16}},
                                          {{"B", 1}, {"L", 1}, {"S", 1}},
                                          {{"B", 1}, {"L", 17}, {"S", 5}},
                                          {{"B", 1}, {"L", 5}, {"S", 33}}};
  e.push_back({"attn",
               "attention alone: q (B,H,L,Dh), k/v (B,H,S,Dh) inputs, no mask",
               [](const GraphShape &s) { return attention_only("attn", s, Mask::None, false); },
               {"B", "L", "S"},
               small,
               bench,
               tests,
               {}});
  e.push_back(
      {"attn_causal",
       "attention alone with a causal mask_mod (q >= kv)",
       [](const GraphShape &s) { return attention_only("attn_causal", s, Mask::Causal, false); },
       {"B", "L", "S"},
       small,
       bench,
       tests,
       {Workload::Form::Attention, Mask::Causal}});
  GraphShape window_bench = bench;
  window_bench.seq = window_bench.kv_len = 8192;
  std::vector<DimBindings> window_tests = tests;
  window_tests.push_back({{"B", 1}, {"L", 300}, {"S", 300}});
  window_tests.push_back({{"B", 1}, {"L", 300}, {"S", 40}}); // rows past S+W-1 see nothing
  e.push_back(
      {"attn_window",
       "attention alone, causal sliding window of W keys (q >= kv && q - kv < W)",
       [](const GraphShape &s) { return attention_only("attn_window", s, Mask::Window, false); },
       {"B", "L", "S"},
       small,
       window_bench,
       window_tests,
       {Workload::Form::Attention, Mask::Window}});
  e.push_back(
      {"attn_decode",
       "attention alone, decoding: L=1 query (static) over S cached keys, no mask",
       [](const GraphShape &s) { return attention_only("attn_decode", s, Mask::None, true); },
       {"B", "S"},
       shape(1, 8, 8, 1, 1024, 128),
       shape(1, 8, 8, 1, 32768, 128),
       {{{"B", 1}, {"S", 1024}}, {{"B", 1}, {"S", 1}}, {{"B", 2}, {"S", 77}}},
       {}});
  // A Llama-like decode step (32 query heads over 8 kv heads of 128) by default.
  e.push_back({"decode",
               "one decode step: 1 query over a KV cache read in place (cache_view; "
               "--paged: 16-row pages through a block table), GQA",
               decode,
               {"B", "C"},
               shape(2, 4, 2, 1, 64, 16),
               shape(1, 32, 8, 1, 4096, 128),
               {{{"B", 2}, {"C", 64}}, {{"B", 1}, {"C", 1}}, {{"B", 3}, {"C", 77}}},
               {Workload::Form::Attention, Mask::None, false, true, true},
               fill_cache});
}

/// The static sizes of a variant are in its types; a shape must agree with them.
void check_static(const Variant &v, const GraphShape &s) {
  check_fits(s.dtype == DType::F32, v.name,
             "written in the typed DSL (examples/gallery/" + std::string(v.name) +
                 ".cpp) with f32 in its types; the shape asks for " +
                 std::string(dtype_name(s.dtype)));
  check_fits(s.heads == H.extent && s.kv_heads == v.kv_heads && s.head_dim == Dh.extent, v.name,
             "written in the typed DSL (examples/gallery/" + std::string(v.name) +
                 ".cpp) with H=" + std::to_string(H.extent) + " Hkv=" + std::to_string(v.kv_heads) +
                 " Dh=" + std::to_string(Dh.extent) +
                 " in its types; the shape asks for H=" + std::to_string(s.heads) +
                 " Hkv=" + std::to_string(s.kv_heads) + " Dh=" + std::to_string(s.head_dim));
}

/// The test shapes of a variant: the default one first, then a second batch with an odd
/// length, then a single query (the decode kernel).
std::vector<DimBindings> variant_tests(const Variant &v, const GraphShape &small) {
  if (v.form == Form::Cross)
    return {{{"B", small.batch}, {"L", small.seq}, {"S", small.kv_len}},
            {{"B", 1}, {"L", 1}, {"S", 1}},
            {{"B", 1}, {"L", 5}, {"S", 17}}};
  std::vector<DimBindings> out = {{{"B", small.batch}, {"L", small.seq}}};
  if (v.test_lengths[0] > 0) {
    for (std::size_t i = 1; i < v.test_lengths.size(); ++i)
      if (v.test_lengths[i] > 0)
        out.push_back({{"B", i == 1 ? 2 : 1}, {"L", v.test_lengths[i]}});
    return out;
  }
  bool block = v.form == Form::Block;
  out.push_back({{"B", block ? 1 : 2}, {"L", block ? 33 : 77}});
  out.push_back({{"B", 1}, {"L", 1}});
  return out;
}

Entry variant_entry(const Variant &v) {
  bool attention = v.form == Form::Attention, cross = v.form == Form::Cross;
  GraphShape small = attention ? shape(1, H.extent, v.kv_heads, 128, 128, Dh.extent)
                     : cross   ? shape(2, H.extent, v.kv_heads, 8, 12, Dh.extent)
                               : shape(2, H.extent, v.kv_heads, 16, 16, Dh.extent);
  if (v.test_lengths[0] > 0)
    small.seq = small.kv_len = v.test_lengths[0];
  small.window = 32;
  GraphShape bench = shape(1, H.extent, v.kv_heads, 2048, 2048, Dh.extent);
  Entry e;
  e.name = v.name;
  e.description = v.summary;
  e.make = [&v](const GraphShape &s) {
    check_static(v, s);
    return v.build(Params{s.window});
  };
  e.dynamic = cross ? std::vector<std::string>{"B", "L", "S"} : std::vector<std::string>{"B", "L"};
  e.shape = small;
  e.bench_shape = bench;
  e.shapes = variant_tests(v, small);
  Graph g = e.make(small);
  bool masked = std::any_of(g.nodes().begin(), g.nodes().end(),
                            [](const Node &n) { return n.attrs.mask != nullptr; });
  e.workload = {attention ? Workload::Form::Attention : Workload::Form::Block,
                masked ? Mask::Expr : Mask::None, cross};
  if (v.inputs)
    e.prepare = [f = v.inputs](TensorMap &in, const GraphShape &) { f(in); };
  e.variant = &v;
  e.window = v.uses_window;
  return e;
}

std::vector<Entry> make() {
  std::vector<Entry> e;
  add_blocks(e);
  add_attention(e);
  for (const Variant *v : variants())
    e.push_back(variant_entry(*v));
  return e;
}

} // namespace

const std::vector<Entry> &entries() {
  static const std::vector<Entry> all = make();
  return all;
}

const Entry &find(const std::string &name) { return find_entry(entries(), name, "gallery graph"); }

} // namespace qkv::gallery
