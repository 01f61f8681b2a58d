// Decoding over a KV cache, end to end: compiled prefill and decode-step kernels that read
// a KVCache or PagedKVCache in place, checked against the interpreter's causal attention
// over each whole sequence. The properties:
//
//   - a prefill of n_b tokens, then m single-token steps (and speculative steps of 3),
//     gives at every position what causal attention over all n_b + m tokens gives;
//     contiguous and paged, GQA, batch 3 with prompts of different lengths;
//   - appending rows and truncating them away again changes nothing: the outputs are
//     bit for bit those of a run that never appended them.
//
// Tolerance: the suite's rule (differential.hpp) with n = 1 + Dh + T, T the sequence's
// total length, inputs in [-1, 1).
#include "differential.hpp"

#include <qkv/runtime/kv_cache.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <tuple>

namespace qkv::test {
namespace {

struct Sizes {
  std::int64_t heads = 4, kv_heads = 2, head_dim = 16;
};

/// The tokens of one sequence: q (1, H, T, Dh), k and v (1, Hkv, T, Dh), random, and the
/// interpreter's causal attention over them, o (1, H, T, Dh).
struct Sequence {
  Tensor q, k, v, o;
};

Sequence make_sequence(const Sizes &s, std::int64_t t, std::uint64_t seed) {
  Sequence seq;
  seq.q = Tensor::random(DType::F32, {1, s.heads, t, s.head_dim}, seed);
  seq.k = Tensor::random(DType::F32, {1, s.kv_heads, t, s.head_dim}, seed + 1);
  seq.v = Tensor::random(DType::F32, {1, s.kv_heads, t, s.head_dim}, seed + 2);
  Graph g("causal_reference");
  Dim T = g.dim("T"), H = g.dim("H", s.heads), Hk = g.dim("Hkv", s.kv_heads),
      Dh = g.dim("Dh", s.head_dim), One = g.dim("one", 1);
  Value q = g.input("q", DType::F32, {One, H, T, Dh});
  Value k = g.input("k", DType::F32, {One, Hk, T, Dh});
  Value v = g.input("v", DType::F32, {One, Hk, T, Dh});
  g.output("o", attention(q, k, v).mask(causal_mask()).value());
  seq.o = reference::run(g, {{"q", seq.q}, {"k", seq.k}, {"v", seq.v}}).at("o");
  return seq;
}

/// A decode-step graph: q (B, H, n, Dh) and this step's k, v (B, Hkv, n, Dh) attend over
/// the cache's rows and their own under cache_mask. n static when `n` > 0.
Graph step_graph(const Sizes &s, bool paged, std::int64_t n) {
  Graph g(paged ? "paged_step" : "step");
  Dim B = g.dim("B"), N = n ? g.dim("n", n) : g.dim("n");
  Dim H = g.dim("H", s.heads), Hk = g.dim("Hkv", s.kv_heads), Dh = g.dim("Dh", s.head_dim);
  Value q = g.input("q", DType::F32, {B, H, N, Dh});
  Value kn = g.input("k_new", DType::F32, {B, Hk, N, Dh});
  Value vn = g.input("v_new", DType::F32, {B, Hk, N, Dh});
  Value len = g.input("lengths", DType::I64, {B});
  Value kk, vv;
  if (paged) {
    Dim P = g.dim("P"), Page = g.dim("page"), M = g.dim("M");
    Value kp = g.input("k_pool", DType::F32, {P, Hk, Page, Dh});
    Value vp = g.input("v_pool", DType::F32, {P, Hk, Page, Dh});
    Value table = g.input("table", DType::I32, {B, M});
    kk = paged_cache_view(kp, table, len, kn);
    vv = paged_cache_view(vp, table, len, vn);
  } else {
    Dim C = g.dim("C");
    kk = cache_view(g.input("k_past", DType::F32, {B, Hk, C, Dh}), len, kn);
    vv = cache_view(g.input("v_past", DType::F32, {B, Hk, C, Dh}), len, vn);
  }
  g.output("o", attention(q, kk, vv).mask(cache_mask(len)).value());
  return g;
}

/// Compiled step kernels, one per graph shape, shared by the tests (compiling is the slow
/// part). Decode.TearDownTestSuite releases them while the JIT's runtime is still up: a
/// kernel destroyed during static destruction can outlive what it needs.
using KernelKey = std::tuple<std::int64_t, std::int64_t, std::int64_t, bool, std::int64_t>;
std::map<KernelKey, std::unique_ptr<Kernel>> &kernels() {
  static std::map<KernelKey, std::unique_ptr<Kernel>> all;
  return all;
}

const Kernel &kernel(const Sizes &s, bool paged, std::int64_t n) {
  auto &k = kernels()[{s.heads, s.kv_heads, s.head_dim, paged, n}];
  if (!k)
    k = std::make_unique<Kernel>(compile(step_graph(s, paged, n)));
  return *k;
}

/// Rows [from, from + count_b) of each sequence, padded to n rows with zeros: the (B, heads,
/// n, Dh) input of one step.
Tensor gather_rows(const std::vector<Sequence> &seqs, Tensor Sequence::*which,
                   const std::vector<std::int64_t> &from, const std::vector<std::int64_t> &counts,
                   std::int64_t n) {
  const Tensor &first = seqs[0].*which;
  std::int64_t heads = first.shape()[1], dh = first.shape()[3];
  Tensor out(DType::F32, {static_cast<std::int64_t>(seqs.size()), heads, n, dh});
  for (std::size_t b = 0; b < seqs.size(); ++b)
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t i = 0; i < counts[b]; ++i)
        for (std::int64_t d = 0; d < dh; ++d)
          out.set((((static_cast<std::int64_t>(b) * heads + h) * n + i) * dh + d),
                  (seqs[b].*which).at({0, h, from[b] + i, d}));
  return out;
}

/// A cache under test: contiguous or paged, one layer.
struct Cache {
  std::unique_ptr<KVCacheBase> cache;
  bool paged = false;

  Cache(const Sizes &s, std::int64_t batch, bool is_paged) : paged(is_paged) {
    if (paged) {
      PagedKVCacheConfig c;
      c.name = "test_pages";
      c.batch = batch;
      c.kv_heads = s.kv_heads;
      c.head_dim = s.head_dim;
      c.page_size = 8;
      c.num_pages = 64;
      c.max_pages_per_seq = 16;
      cache = std::make_unique<PagedKVCache>(c);
    } else {
      KVCacheConfig c;
      c.name = "test_cache";
      c.batch = batch;
      c.kv_heads = s.kv_heads;
      c.head_dim = s.head_dim;
      c.capacity = 128;
      cache = std::make_unique<KVCache>(c);
    }
  }

  /// The step kernel's inputs that come from the cache.
  void bind(TensorMap &in) const {
    in["lengths"] = cache->lengths();
    if (paged) {
      const auto &p = static_cast<const PagedKVCache &>(*cache);
      in["k_pool"] = p.key_pool(0);
      in["v_pool"] = p.value_pool(0);
      in["table"] = p.block_table();
    } else {
      const auto &c = static_cast<const KVCache &>(*cache);
      in["k_past"] = c.keys(0);
      in["v_past"] = c.values(0);
    }
  }
};

/// Runs one step of counts[b] tokens per sequence (from each sequence's cached length),
/// appends its rows to the cache and returns the output (B, H, n, Dh).
Tensor step(const Sizes &s, Cache &c, const std::vector<Sequence> &seqs,
            const std::vector<std::int64_t> &counts, std::int64_t static_n) {
  std::vector<std::int64_t> from(seqs.size());
  for (std::size_t b = 0; b < seqs.size(); ++b)
    from[b] = c.cache->length(static_cast<std::int64_t>(b));
  std::int64_t n = static_n ? static_n : *std::max_element(counts.begin(), counts.end());
  TensorMap in;
  in["q"] = gather_rows(seqs, &Sequence::q, from, counts, n);
  in["k_new"] = gather_rows(seqs, &Sequence::k, from, counts, n);
  in["v_new"] = gather_rows(seqs, &Sequence::v, from, counts, n);
  c.bind(in);
  Tensor o = kernel(s, c.paged, static_n).run(in).at("o");
  c.cache->append_step({in["k_new"]}, {in["v_new"]}, counts);
  return o;
}

/// Checks the step's real rows against the reference at their positions.
void expect_rows_match(const Sizes &s, const Tensor &o, const std::vector<Sequence> &seqs,
                       const std::vector<std::int64_t> &from,
                       const std::vector<std::int64_t> &counts, const std::string &what) {
  std::int64_t n = o.shape()[2];
  for (std::size_t b = 0; b < seqs.size(); ++b) {
    std::int64_t total = seqs[b].o.shape()[2];
    Tolerance tol = tolerance(DType::F32, static_cast<double>(1 + s.head_dim + total), 1.0);
    double worst = 0;
    for (std::int64_t h = 0; h < s.heads; ++h)
      for (std::int64_t i = 0; i < counts[b]; ++i)
        for (std::int64_t d = 0; d < s.head_dim; ++d) {
          double got = o.at({static_cast<std::int64_t>(b), h, i, d});
          double want = seqs[b].o.at({0, h, from[b] + i, d});
          double err = std::abs(got - want) / (tol.atol + tol.rtol * std::abs(want));
          worst = std::max(worst, std::isnan(got) ? 1e30 : err);
        }
    EXPECT_LE(worst, 1.0) << what << ": sequence " << b << " rows [" << from[b] << ", "
                          << from[b] + counts[b] << ") of " << total << " (n = " << n
                          << "): worst error / allowed";
  }
}

/// Prefill of prompts[b] tokens, then `steps` single-token steps and one speculative step
/// of 3, each checked against causal attention over the whole sequences.
void prefill_then_decode(const Sizes &s, bool paged, const std::vector<std::int64_t> &prompts,
                         std::int64_t steps) {
  std::string what = std::string(paged ? "paged" : "contiguous") + " H" +
                     std::to_string(s.heads) + "/" + std::to_string(s.kv_heads) + " Dh" +
                     std::to_string(s.head_dim);
  std::vector<Sequence> seqs;
  for (std::size_t b = 0; b < prompts.size(); ++b)
    seqs.push_back(make_sequence(s, prompts[b] + steps + 3, 100 * b + 7));
  Cache c(s, static_cast<std::int64_t>(prompts.size()), paged);
  auto run_step = [&](const std::vector<std::int64_t> &counts, std::int64_t static_n,
                      const std::string &label) {
    std::vector<std::int64_t> from;
    for (std::size_t b = 0; b < seqs.size(); ++b)
      from.push_back(c.cache->length(static_cast<std::int64_t>(b)));
    Tensor o = step(s, c, seqs, counts, static_n);
    expect_rows_match(s, o, seqs, from, counts, what + " " + label);
  };
  run_step(prompts, 0, "prefill");
  std::vector<std::int64_t> ones(prompts.size(), 1), threes(prompts.size(), 3);
  for (std::int64_t t = 0; t < steps; ++t)
    run_step(ones, 1, "decode step " + std::to_string(t));
  run_step(threes, 3, "speculative step of 3");
  for (std::size_t b = 0; b < seqs.size(); ++b)
    EXPECT_EQ(c.cache->length(static_cast<std::int64_t>(b)), prompts[b] + steps + 3);
}

class Decode : public testing::Test {
protected:
  static void TearDownTestSuite() { kernels().clear(); }
};

TEST_F(Decode, PrefillThenStepsEqualsCausalAttentionContiguous) {
  prefill_then_decode({}, false, {5, 17, 1}, 4);
  prefill_then_decode({8, 1, 32}, false, {70, 33}, 2); // MQA, key tiles of 32 crossed
}

TEST_F(Decode, PrefillThenStepsEqualsCausalAttentionPaged) {
  prefill_then_decode({}, true, {5, 17, 1}, 4); // pages of 8: prompts end mid-page
  prefill_then_decode({8, 1, 32}, true, {70, 33}, 2);
}

/// Appending 5 rows and truncating them away leaves every later output bit for bit as if
/// they were never appended.
void truncate_is_undo(bool paged) {
  Sizes s;
  std::vector<std::int64_t> prompts = {9, 3};
  std::vector<Sequence> seqs, junk;
  for (std::size_t b = 0; b < prompts.size(); ++b) {
    seqs.push_back(make_sequence(s, prompts[b] + 3, 40 + b));
    junk.push_back(make_sequence(s, 32, 90 + b));
  }
  auto run_all = [&](bool with_junk) {
    Cache c(s, 2, paged);
    step(s, c, seqs, prompts, 0);
    if (with_junk) {
      // 5 junk rows per sequence, from the junk sequences' rows at the same positions.
      step(s, c, junk, {5, 5}, 0);
      for (std::int64_t b = 0; b < 2; ++b)
        c.cache->truncate(b, prompts[b]);
    }
    std::vector<Tensor> outs;
    for (int t = 0; t < 3; ++t)
      outs.push_back(step(s, c, seqs, {1, 1}, 1));
    return outs;
  };
  std::vector<Tensor> clean = run_all(false), edited = run_all(true);
  for (std::size_t t = 0; t < clean.size(); ++t) {
    Comparison cmp = compare(edited[t], clean[t], 0, 0);
    EXPECT_TRUE(cmp.ok) << (paged ? "paged" : "contiguous") << " step " << t << ": "
                        << cmp.message;
  }
}

TEST_F(Decode, TruncateThenAppendEqualsNeverAppending) {
  truncate_is_undo(false);
  truncate_is_undo(true);
}

} // namespace
} // namespace qkv::test
