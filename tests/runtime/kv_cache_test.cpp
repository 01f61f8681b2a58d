// KV caches: the contiguous and the paged layout, checked element by element against the
// rows appended, against each other, and against a std::vector model under random
// sequences of operations; every error leaves the cache bit for bit as it was.
#include <qkv/runtime/kv_cache.hpp>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "qkv_test/errors.hpp"

namespace qkv {
namespace {

using test::ErrorSays;

// ---- helpers ---------------------------------------------------------------------------

/// New rows (B, H, n, Dh) with values that tell rows apart.
Tensor rows(std::int64_t b, std::int64_t h, std::int64_t n, std::int64_t dh, std::uint64_t seed,
            DType dtype = DType::F32) {
  return Tensor::random(dtype, {b, h, n, dh}, seed);
}

bool same_bytes(const Tensor &a, const Tensor &b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

/// Everything observable about a cache, deep-copied.
struct Snapshot {
  std::vector<Tensor> tensors;
  std::vector<std::int64_t> numbers;
};

Snapshot snapshot(const KVCache &c) {
  Snapshot s;
  s.tensors.push_back(c.lengths().clone());
  for (std::int64_t l = 0; l < c.layers(); ++l) {
    s.tensors.push_back(c.keys(l).clone());
    s.tensors.push_back(c.values(l).clone());
  }
  s.numbers.push_back(c.step_open());
  return s;
}

/// The paged cache's state; `pools`: its pools too (bit for bit, rows past lengths
/// included).
Snapshot snapshot(const PagedKVCache &c, bool pools = true) {
  Snapshot s;
  s.tensors.push_back(c.lengths().clone());
  s.tensors.push_back(c.block_table().clone());
  for (std::int64_t l = 0; pools && l < c.layers(); ++l) {
    s.tensors.push_back(c.key_pool(l).clone());
    s.tensors.push_back(c.value_pool(l).clone());
  }
  s.numbers = {c.step_open(), c.free_pages(), c.pages_used()};
  for (std::int64_t p = 0; p < c.num_pages(); ++p)
    s.numbers.push_back(c.refcount(p));
  return s;
}

void expect_same(const Snapshot &a, const Snapshot &b) {
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (std::size_t i = 0; i < a.tensors.size(); ++i)
    EXPECT_TRUE(same_bytes(a.tensors[i], b.tensors[i])) << "tensor " << i << " changed";
  EXPECT_EQ(a.numbers, b.numbers);
}

/// Rows [from, from + n) of sequence b of new rows t (B, H, n', Dh), as (H, n, Dh) values.
std::vector<double> slice(const Tensor &t, std::int64_t b, std::int64_t from, std::int64_t n) {
  std::vector<double> out;
  for (std::int64_t h = 0; h < t.shape()[1]; ++h)
    for (std::int64_t j = from; j < from + n; ++j)
      for (std::int64_t d = 0; d < t.shape()[3]; ++d)
        out.push_back(t.at({b, h, j, d}));
  return out;
}

/// Concatenates per-head row blocks: a (H, n, Dh) then b (H, m, Dh) -> (H, n + m, Dh).
std::vector<double> concat_rows(const std::vector<double> &a, const std::vector<double> &b,
                                std::int64_t heads) {
  std::vector<double> out;
  std::size_t na = a.size() / heads, nb = b.size() / heads;
  for (std::int64_t h = 0; h < heads; ++h) {
    out.insert(out.end(), a.begin() + h * na, a.begin() + (h + 1) * na);
    out.insert(out.end(), b.begin() + h * nb, b.begin() + (h + 1) * nb);
  }
  return out;
}

KVCacheConfig small_config(std::int64_t capacity = 8) {
  return {.name = "c", .layers = 2, .batch = 2, .kv_heads = 2, .head_dim = 3, .capacity = capacity};
}

PagedKVCacheConfig small_paged(std::int64_t num_pages = 8, std::int64_t page_size = 4,
                               std::int64_t max_pages = 4) {
  return {.name = "p",
          .layers = 2,
          .batch = 2,
          .kv_heads = 2,
          .head_dim = 3,
          .page_size = page_size,
          .num_pages = num_pages,
          .max_pages_per_seq = max_pages};
}

/// One step of n new rows for every layer of a 2-layer cache, seeds distinct per layer.
struct StepRows {
  std::vector<Tensor> ks, vs;
};
StepRows step_rows(const KVCacheBase &c, std::int64_t n, std::uint64_t seed) {
  StepRows s;
  for (std::int64_t l = 0; l < c.layers(); ++l) {
    s.ks.push_back(rows(c.batch(), c.kv_heads(), n, c.head_dim(), seed * 100 + 2 * l, c.dtype()));
    s.vs.push_back(
        rows(c.batch(), c.kv_heads(), n, c.head_dim(), seed * 100 + 2 * l + 1, c.dtype()));
  }
  return s;
}

// ---- the model: rows as vectors of doubles ---------------------------------------------

/// rows[layer][kind 0 = K, 1 = V][b] is a list of rows, each H * Dh values (h-major).
struct Model {
  std::int64_t layers, batch, heads, dh;
  std::vector<std::vector<std::vector<std::vector<std::vector<double>>>>> rows;

  explicit Model(const KVCacheBase &c)
      : layers(c.layers()), batch(c.batch()), heads(c.kv_heads()), dh(c.head_dim()),
        rows(static_cast<std::size_t>(layers),
             std::vector<std::vector<std::vector<std::vector<double>>>>(
                 2,
                 std::vector<std::vector<std::vector<double>>>(static_cast<std::size_t>(batch)))) {}

  std::int64_t length(std::int64_t b) const { return std::ssize(rows[0][0][b]); }

  void append(std::int64_t l, const Tensor &k, const Tensor &v,
              const std::vector<std::int64_t> &counts) {
    for (int kind = 0; kind < 2; ++kind)
      for (std::int64_t b = 0; b < batch; ++b)
        for (std::int64_t j = 0; j < counts[b]; ++j) {
          std::vector<double> row;
          for (std::int64_t h = 0; h < heads; ++h)
            for (std::int64_t d = 0; d < dh; ++d)
              row.push_back((kind ? v : k).at({b, h, j, d}));
          rows[l][kind][b].push_back(row);
        }
  }
  void truncate(std::int64_t b, std::int64_t n) {
    for (auto &layer : rows)
      for (auto &kind : layer)
        kind[b].resize(n);
  }
  void fork(std::int64_t src, std::int64_t dst, std::int64_t n) {
    for (auto &layer : rows)
      for (auto &kind : layer)
        kind[dst].assign(kind[src].begin(), kind[src].begin() + n);
  }
  /// (H, length, Dh) row-major, as read_keys / read_values return it.
  std::vector<double> dense(std::int64_t l, int kind, std::int64_t b) const {
    std::vector<double> out;
    for (std::int64_t h = 0; h < heads; ++h)
      for (const auto &row : rows[l][kind][b])
        out.insert(out.end(), row.begin() + h * dh, row.begin() + (h + 1) * dh);
    return out;
  }
};

/// The cache holds exactly the model's rows, in every layer and sequence.
void expect_matches(const KVCacheBase &c, const Model &m) {
  for (std::int64_t b = 0; b < c.batch(); ++b) {
    ASSERT_EQ(c.length(b), m.length(b)) << c.name() << " sequence " << b;
    EXPECT_EQ(c.lengths().at({b}), static_cast<double>(m.length(b)));
    for (std::int64_t l = 0; l < c.layers(); ++l) {
      Tensor k = c.read_keys(l, b), v = c.read_values(l, b);
      EXPECT_EQ(k.shape(), (Shape{c.kv_heads(), m.length(b), c.head_dim()}));
      EXPECT_EQ(k.values(), m.dense(l, 0, b)) << c.name() << " layer " << l << " seq " << b;
      EXPECT_EQ(v.values(), m.dense(l, 1, b)) << c.name() << " layer " << l << " seq " << b;
    }
  }
}

/// The paged cache's bookkeeping agrees with its block table: each sequence holds
/// ceil(length / page_size) pages then -1s, refcounts count the table's entries, and the
/// used pages are the distinct ones in the table.
void expect_paged_invariants(const PagedKVCache &c) {
  std::map<std::int32_t, std::int32_t> held;
  for (std::int64_t b = 0; b < c.batch(); ++b) {
    std::int64_t n = (c.length(b) + c.page_size() - 1) / c.page_size();
    std::vector<std::int32_t> pages = c.pages(b);
    ASSERT_EQ(std::ssize(pages), n) << "sequence " << b;
    for (std::int64_t j = 0; j < c.max_pages_per_seq(); ++j) {
      double entry = c.block_table().at({b, j});
      EXPECT_EQ(entry, j < n ? pages[j] : -1) << "block table (" << b << ", " << j << ")";
    }
    std::set<std::int32_t> distinct(pages.begin(), pages.end());
    EXPECT_EQ(distinct.size(), pages.size()) << "sequence " << b << " holds a page twice";
    for (std::int32_t p : pages)
      ++held[p];
  }
  for (std::int64_t p = 0; p < c.num_pages(); ++p)
    EXPECT_EQ(c.refcount(p), held.count(p) ? held[p] : 0) << "page " << p;
  EXPECT_EQ(c.pages_used(), std::ssize(held));
  EXPECT_EQ(c.free_pages() + c.pages_used(), c.num_pages());
}

/// Outside a step, the contiguous cache's rows at or past each length are zero.
void expect_zero_past_lengths(const KVCache &c) {
  for (std::int64_t l = 0; l < c.layers(); ++l)
    for (const Tensor *t : {&c.keys(l), &c.values(l)})
      for (std::int64_t b = 0; b < c.batch(); ++b)
        for (std::int64_t h = 0; h < c.kv_heads(); ++h)
          for (std::int64_t j = c.length(b); j < c.capacity(); ++j)
            for (std::int64_t d = 0; d < c.head_dim(); ++d)
              ASSERT_EQ(t->at({b, h, j, d}), 0.0) << "layer " << l << " seq " << b << " row " << j;
}

// ---- the contiguous cache ----------------------------------------------------------------

TEST(KVCache, Layout) {
  KVCache c(small_config());
  EXPECT_EQ(c.keys(1).shape(), (Shape{2, 2, 8, 3}));
  EXPECT_EQ(c.values(0).dtype(), DType::F32);
  EXPECT_EQ(c.lengths().shape(), Shape{2});
  EXPECT_EQ(c.lengths().dtype(), DType::I64);
  EXPECT_EQ(c.capacity(), 8);
  StepRows s = step_rows(c, 3, 1);
  c.append_step(s.ks, s.vs);
  StepRows t = step_rows(c, 2, 2);
  c.append_step(t.ks, t.vs);
  // Key j of sequence b, head h, is keys(l)[b, h, j, :]: rows 0..2 from the first step,
  // 3..4 from the second.
  for (std::int64_t l = 0; l < 2; ++l)
    for (std::int64_t b = 0; b < 2; ++b)
      for (std::int64_t h = 0; h < 2; ++h)
        for (std::int64_t d = 0; d < 3; ++d) {
          for (std::int64_t j = 0; j < 3; ++j) {
            EXPECT_EQ(c.keys(l).at({b, h, j, d}), s.ks[l].at({b, h, j, d}));
            EXPECT_EQ(c.values(l).at({b, h, j, d}), s.vs[l].at({b, h, j, d}));
          }
          for (std::int64_t j = 0; j < 2; ++j)
            EXPECT_EQ(c.keys(l).at({b, h, 3 + j, d}), t.ks[l].at({b, h, j, d}));
        }
  EXPECT_EQ(c.lengths().values(), (std::vector<double>{5, 5}));
  expect_zero_past_lengths(c);
  // Reads are dense (Hkv, length, Dh) copies.
  Tensor k = c.read_keys(1, 0);
  EXPECT_EQ(k.shape(), (Shape{2, 5, 3}));
  EXPECT_EQ(k.values(), concat_rows(slice(s.ks[1], 0, 0, 3), slice(t.ks[1], 0, 0, 2), 2));
  EXPECT_EQ(c.read_values(0, 1).values(),
            concat_rows(slice(s.vs[0], 1, 0, 3), slice(t.vs[0], 1, 0, 2), 2));
}

TEST(KVCache, RaggedCounts) {
  KVCache c(small_config());
  StepRows s = step_rows(c, 3, 1); // prompts of 3 and 1 rows, padded to 3
  c.append_step(s.ks, s.vs, {3, 1});
  EXPECT_EQ(c.length(0), 3);
  EXPECT_EQ(c.length(1), 1);
  StepRows t = step_rows(c, 2, 2); // sequence 0 sits this step out
  c.append_step(t.ks, t.vs, {0, 2});
  EXPECT_EQ(c.lengths().values(), (std::vector<double>{3, 3}));
  EXPECT_EQ(c.read_keys(0, 0).values(), slice(s.ks[0], 0, 0, 3));
  EXPECT_EQ(c.read_keys(1, 1).values(),
            concat_rows(slice(s.ks[1], 1, 0, 1), slice(t.ks[1], 1, 0, 2), 2));
  EXPECT_EQ(c.read_values(1, 1).values(),
            concat_rows(slice(s.vs[1], 1, 0, 1), slice(t.vs[1], 1, 0, 2), 2));
  expect_zero_past_lengths(c); // the padding rows were not written
}

TEST(KVCache, LayerByLayerStep) {
  KVCache c(small_config());
  StepRows s = step_rows(c, 2, 1);
  c.append_step(s.ks, s.vs);
  Snapshot before = snapshot(c);
  StepRows t = step_rows(c, 1, 2);
  c.append(0, t.ks[0], t.vs[0]);
  EXPECT_TRUE(c.step_open());
  // The row is written, but lengths move only in advance().
  EXPECT_EQ(c.keys(0).at({0, 1, 2, 0}), t.ks[0].at({0, 1, 0, 0}));
  EXPECT_EQ(c.length(0), 2);
  EXPECT_TRUE(ErrorSays([&] { c.advance(); }, {"KV cache 'c'", "advance() before layers [1]"}));
  EXPECT_TRUE(ErrorSays([&] { c.append(0, t.ks[0], t.vs[0]); },
                        {"layer 0 has already appended in this step"}));
  EXPECT_TRUE(ErrorSays(
      [&] {
        c.append(1, t.ks[1], t.vs[1], {1, 0});
      },
      {"append to layer 1", "counts [1, 0] differ from the step's [1, 1]"}));
  EXPECT_TRUE(ErrorSays([&] { c.truncate(0, 1); },
                        {"truncate(0, 1) while a step is open", "layers appended so far: [0]"}));
  EXPECT_TRUE(ErrorSays([&] { c.append_step(t.ks, t.vs); }, {"append_step while a step"}));
  c.abort_step(); // drops layer 0's rows: the cache is as before the step
  expect_same(snapshot(c), before);
  c.abort_step(); // nothing open: nothing happens
  EXPECT_TRUE(ErrorSays([&] { c.advance(); }, {"advance() without an open step"}));

  c.append(1, t.ks[1], t.vs[1]); // any layer order
  c.append(0, t.ks[0], t.vs[0]);
  c.advance();
  EXPECT_EQ(c.lengths().values(), (std::vector<double>{3, 3}));
  KVCache d(small_config()); // the same rows through append_step
  d.append_step(s.ks, s.vs);
  d.append_step(t.ks, t.vs);
  expect_same(snapshot(c), snapshot(d));
}

TEST(KVCache, BeginStepThenAppendTakesTheStepsCounts) {
  KVCache c(small_config());
  c.begin_step({2, 0});
  StepRows s = step_rows(c, 2, 1);
  c.append(0, s.ks[0], s.vs[0]); // empty counts: the step's
  c.append(1, s.ks[1], s.vs[1], {2, 0});
  c.advance();
  EXPECT_EQ(c.lengths().values(), (std::vector<double>{2, 0}));
  c.begin_step({3, 1});
  EXPECT_TRUE(ErrorSays([&] { c.append(0, s.ks[0], s.vs[0]); },
                        {"the step appends 3 rows to sequence 0 but the new keys hold 2"}));
}

TEST(KVCache, OverflowLeavesTheCacheUnchanged) {
  KVCache c(small_config(8));
  StepRows s = step_rows(c, 7, 1);
  c.append_step(s.ks, s.vs, {5, 7});
  Snapshot before = snapshot(c);
  StepRows t = step_rows(c, 2, 2);
  EXPECT_TRUE(ErrorSays([&] { c.append_step(t.ks, t.vs); },
                        {"KV cache 'c'", "sequence 1 holds 7 rows", "appending 2 would make 9",
                         "capacity of 8", "nothing was written"}));
  expect_same(snapshot(c), before);
  EXPECT_TRUE(ErrorSays([&] { c.append(1, t.ks[1], t.vs[1]); }, {"sequence 1 holds 7 rows"}));
  expect_same(snapshot(c), before); // no step was opened, no layer written
  EXPECT_TRUE(ErrorSays([&] { c.begin_step({0, 2}); }, {"sequence 1 holds 7"}));
  expect_same(snapshot(c), before);
  c.append_step(t.ks, t.vs, {2, 1}); // exactly full
  EXPECT_EQ(c.lengths().values(), (std::vector<double>{7, 8}));
}

template <class Cache> void truncate_then_append(Cache &spec, Cache &plain) {
  StepRows s1 = step_rows(spec, 5, 1), s2 = step_rows(spec, 3, 2), s3 = step_rows(spec, 2, 3);
  spec.append_step(s1.ks, s1.vs, {5, 2});
  spec.append_step(s2.ks, s2.vs, {3, 1}); // speculative tokens, then rejected
  spec.truncate(0, 5);
  spec.truncate(1, 2);
  spec.append_step(s3.ks, s3.vs);
  plain.append_step(s1.ks, s1.vs, {5, 2});
  plain.append_step(s3.ks, s3.vs);
  Model m(plain);
  m.append(0, s1.ks[0], s1.vs[0], {5, 2});
  m.append(1, s1.ks[1], s1.vs[1], {5, 2});
  m.append(0, s3.ks[0], s3.vs[0], {2, 2});
  m.append(1, s3.ks[1], s3.vs[1], {2, 2});
  expect_matches(spec, m);
  expect_matches(plain, m);
}

TEST(KVCache, TruncateThenAppendEqualsNeverAppended) {
  KVCache spec(small_config()), plain(small_config());
  truncate_then_append(spec, plain);
  expect_same(snapshot(spec), snapshot(plain)); // bit for bit, rows past lengths included
}

TEST(KVCache, Reset) {
  KVCache c(small_config());
  StepRows s = step_rows(c, 4, 1);
  c.append_step(s.ks, s.vs, {4, 3});
  c.reset(0);
  EXPECT_EQ(c.lengths().values(), (std::vector<double>{0, 3}));
  EXPECT_EQ(c.read_keys(1, 1).values(), slice(s.ks[1], 1, 0, 3));
  expect_zero_past_lengths(c);
  c.reset();
  expect_same(snapshot(c), snapshot(KVCache(small_config())));
}

TEST(KVCache, ForkCopies) {
  KVCache c(small_config());
  StepRows s = step_rows(c, 5, 1);
  c.append_step(s.ks, s.vs, {5, 2});
  c.fork(0, 1, 3);
  EXPECT_EQ(c.length(1), 3);
  EXPECT_EQ(c.read_keys(1, 1).values(), slice(s.ks[1], 0, 0, 3));
  expect_zero_past_lengths(c);
  c.fork(0, 1);
  EXPECT_EQ(c.read_values(0, 1).values(), c.read_values(0, 0).values());
}

TEST(KVCache, OtherDtypes) {
  for (DType t : {DType::F64, DType::F16, DType::BF16}) {
    KVCacheConfig cfg = small_config();
    cfg.dtype = t;
    KVCache c(cfg);
    StepRows s = step_rows(c, 3, 1);
    c.append_step(s.ks, s.vs, {3, 2});
    EXPECT_EQ(c.keys(0).dtype(), t);
    EXPECT_EQ(c.read_keys(0, 1).dtype(), t);
    EXPECT_EQ(c.read_keys(1, 1).values(), slice(s.ks[1], 1, 0, 2)) << dtype_name(t);
    EXPECT_EQ(c.read_values(0, 0).values(), slice(s.vs[0], 0, 0, 3)) << dtype_name(t);
  }
}

TEST(KVCache, Errors) {
  auto make = [](KVCacheConfig cfg) { KVCache c(cfg); };
  KVCacheConfig cfg = small_config();
  cfg.kv_heads = 0;
  EXPECT_TRUE(ErrorSays([&] { make(cfg); }, {"KV cache 'c'", "kv_heads must be at least 1"}));
  cfg = small_config(0);
  EXPECT_TRUE(ErrorSays([&] { make(cfg); }, {"capacity must be at least 1, got 0"}));
  cfg = small_config();
  cfg.dtype = DType::I32;
  EXPECT_TRUE(ErrorSays([&] { make(cfg); }, {"holds floats", "not i32"}));

  KVCache c(small_config());
  Tensor k = rows(2, 2, 3, 3, 1), v = rows(2, 2, 3, 3, 2);
  EXPECT_TRUE(
      ErrorSays([&] { c.append(2, k, v); }, {"append: layer 2 is out of range", "2 layers"}));
  EXPECT_TRUE(ErrorSays([&] { c.append(1, rows(2, 1, 3, 3, 1), v); },
                        {"KV cache 'c', layer 1", "new keys are f32[2, 1, 3, 3]",
                         "takes f32 (B=2, Hkv=2, n, Dh=3)"}));
  EXPECT_TRUE(ErrorSays([&] { c.append(0, k, k.to(DType::F64)); }, {"new values are f64"}));
  EXPECT_TRUE(ErrorSays([&] { c.append(0, k, rows(2, 2, 2, 3, 1)); },
                        {"new keys have 3 rows per sequence, the new values 2"}));
  EXPECT_TRUE(ErrorSays([&] { c.append(0, k, Tensor()); }, {"new values are an empty tensor"}));
  EXPECT_TRUE(ErrorSays([&] { c.append(0, k, v, {1}); }, {"1 counts [1] for 2 sequences"}));
  EXPECT_TRUE(ErrorSays(
      [&] {
        c.append(0, k, v, {1, 4});
      },
      {"count 4 for sequence 1 is not in [0, n=3]"}));
  EXPECT_TRUE(ErrorSays([&] { c.append_step({k}, {v}); },
                        {"append_step: 1 key tensors and 1 value tensors for 2 layers"}));
  EXPECT_TRUE(ErrorSays(
      [&] {
        c.append_step({k, rows(2, 2, 1, 3, 1)}, {v, rows(2, 2, 1, 3, 1)});
      },
      {"layer 1's new keys have 1 rows per sequence, layer 0's 3"}));
  EXPECT_TRUE(ErrorSays([&] { c.begin_step({}); }, {"needs one count per sequence (2)"}));
  EXPECT_TRUE(ErrorSays([&] { c.begin_step({1, -1}); }, {"count -1 for sequence 1 is negative"}));
  expect_same(snapshot(c), snapshot(KVCache(small_config())));

  c.append_step({k, k}, {v, v}, {3, 1});
  EXPECT_TRUE(ErrorSays([&] { c.truncate(1, 2); },
                        {"truncate: sequence 1 holds 1 rows; cannot truncate it to 2"}));
  EXPECT_TRUE(ErrorSays([&] { c.truncate(2, 0); },
                        {"truncate: sequence 2 is out of range", "holds 2 sequences"}));
  EXPECT_TRUE(ErrorSays([&] { c.fork(1, 1); }, {"source and destination are both sequence 1"}));
  EXPECT_TRUE(ErrorSays([&] { c.fork(1, 0, 2); },
                        {"fork: sequence 1 holds 1 rows; cannot share a prefix of 2"}));
  EXPECT_TRUE(ErrorSays([&] { c.read_keys(0, -1); }, {"read_keys: sequence -1 is out of range"}));
  EXPECT_TRUE(ErrorSays([&] { c.keys(5); }, {"keys: layer 5 is out of range"}));
  EXPECT_TRUE(ErrorSays([&] { c.length(3); }, {"length: sequence 3"}));
}

// ---- the paged cache ---------------------------------------------------------------------

TEST(PagedKVCache, Layout) {
  PagedKVCache c(small_paged(8, 4, 3));
  EXPECT_EQ(c.key_pool(0).shape(), (Shape{8, 2, 4, 3}));
  EXPECT_EQ(c.value_pool(1).shape(), (Shape{8, 2, 4, 3}));
  EXPECT_EQ(c.block_table().shape(), (Shape{2, 3}));
  EXPECT_EQ(c.block_table().dtype(), DType::I32);
  EXPECT_EQ(c.block_table().values(), std::vector<double>(6, -1));
  EXPECT_EQ(c.capacity(), 12);
  EXPECT_EQ(c.free_pages(), 8);
  StepRows s = step_rows(c, 5, 1);
  c.append_step(s.ks, s.vs, {5, 3}); // pages are taken lowest first, sequence by sequence
  EXPECT_EQ(c.block_table().values(), (std::vector<double>{0, 1, -1, 2, -1, -1}));
  EXPECT_EQ(c.pages(0), (std::vector<std::int32_t>{0, 1}));
  EXPECT_EQ(c.pages(1), (std::vector<std::int32_t>{2}));
  EXPECT_EQ(c.pages_used(), 3);
  // Key j of sequence b is row j % 4 of page block_table[b, j / 4].
  for (std::int64_t l = 0; l < 2; ++l)
    for (std::int64_t h = 0; h < 2; ++h)
      for (std::int64_t d = 0; d < 3; ++d) {
        for (std::int64_t j = 0; j < 5; ++j) {
          EXPECT_EQ(c.key_pool(l).at({j / 4, h, j % 4, d}), s.ks[l].at({0, h, j, d}));
          EXPECT_EQ(c.value_pool(l).at({j / 4, h, j % 4, d}), s.vs[l].at({0, h, j, d}));
        }
        for (std::int64_t j = 0; j < 3; ++j)
          EXPECT_EQ(c.key_pool(l).at({2, h, j, d}), s.ks[l].at({1, h, j, d}));
      }
  StepRows t = step_rows(c, 4, 2);
  c.append_step(t.ks, t.vs, {4, 1}); // sequence 0 fills page 1 and takes 3; 1 fits page 2
  EXPECT_EQ(c.block_table().values(), (std::vector<double>{0, 1, 3, 2, -1, -1}));
  EXPECT_EQ(c.key_pool(1).at({3, 1, 0, 2}), t.ks[1].at({0, 1, 3, 2}));
  EXPECT_EQ(c.value_pool(0).at({2, 0, 3, 1}), t.vs[0].at({1, 0, 0, 1}));
  expect_paged_invariants(c);
  Model m(c);
  for (std::int64_t l = 0; l < 2; ++l) {
    m.append(l, s.ks[l], s.vs[l], {5, 3});
    m.append(l, t.ks[l], t.vs[l], {4, 1});
  }
  expect_matches(c, m);
}

TEST(PagedKVCache, PageExhaustionLeavesTheCacheUnchanged) {
  PagedKVCache c(small_paged(3, 2, 3));
  StepRows s = step_rows(c, 3, 1);
  c.append_step(s.ks, s.vs, {3, 0}); // pages 0, 1
  Snapshot before = snapshot(c);
  StepRows t = step_rows(c, 3, 2);
  EXPECT_TRUE(ErrorSays(
      [&] {
        c.append_step(t.ks, t.vs, {2, 3});
      },
      {"paged KV cache 'p'", "the step needs 3 free pages", "sequence 0: 1, sequence 1: 2",
       "only 1 of 3 are free", "nothing was written"}));
  expect_same(snapshot(c), before);
  EXPECT_TRUE(ErrorSays([&] { c.append(1, t.ks[1], t.vs[1], {2, 3}); }, {"needs 3 free pages"}));
  expect_same(snapshot(c), before);
  c.append_step(t.ks, t.vs, {1, 2}); // row 3 fits page 1; sequence 1 takes the last page
  EXPECT_EQ(c.free_pages(), 0);
  EXPECT_EQ(c.block_table().values(), (std::vector<double>{0, 1, -1, 2, -1, -1}));
}

TEST(PagedKVCache, OverflowOfTheBlockTable) {
  PagedKVCache c(small_paged(8, 2, 2)); // 2 pages of 2 rows per sequence
  StepRows s = step_rows(c, 3, 1);
  c.append_step(s.ks, s.vs, {3, 3});
  Snapshot before = snapshot(c);
  StepRows t = step_rows(c, 2, 2);
  EXPECT_TRUE(ErrorSays(
      [&] {
        c.append_step(t.ks, t.vs, {1, 2});
      },
      {"paged KV cache 'p'", "sequence 1 holds 3 rows", "appending 2", "capacity of 4"}));
  expect_same(snapshot(c), before);
}

TEST(PagedKVCache, ForkSharesPagesAndCopiesOnWrite) {
  PagedKVCache c(small_paged(8, 4, 4));
  StepRows s = step_rows(c, 6, 1);
  c.append_step(s.ks, s.vs, {6, 0}); // sequence 0: pages 0 (full) and 1 (rows 4, 5)
  Tensor k0 = c.read_keys(1, 0), v0 = c.read_values(0, 0);
  c.fork(0, 1);
  EXPECT_EQ(c.pages_used(), 2); // shared, not copied
  EXPECT_EQ(c.pages(1), c.pages(0));
  EXPECT_EQ(c.refcount(0), 2);
  EXPECT_EQ(c.refcount(1), 2);
  EXPECT_TRUE(same_bytes(c.read_keys(1, 1), k0));
  expect_paged_invariants(c);

  // Sequence 1 writes row 6 into shared page 1: it gets a private copy first.
  StepRows t = step_rows(c, 1, 2);
  c.append_step(t.ks, t.vs, {0, 1});
  EXPECT_EQ(c.pages_used(), 3);
  EXPECT_EQ(c.pages(0), (std::vector<std::int32_t>{0, 1}));
  EXPECT_EQ(c.pages(1), (std::vector<std::int32_t>{0, 2}));
  EXPECT_EQ(c.refcount(0), 2);
  EXPECT_EQ(c.refcount(1), 1);
  EXPECT_TRUE(same_bytes(c.read_keys(1, 0), k0)); // the source is untouched
  EXPECT_TRUE(same_bytes(c.read_values(0, 0), v0));
  EXPECT_EQ(c.read_keys(1, 1).values(),
            concat_rows(slice(s.ks[1], 0, 0, 6), slice(t.ks[1], 1, 0, 1), 2));
  expect_paged_invariants(c);

  // Row 7 lands in sequence 1's own page: no copy.
  c.append_step(t.ks, t.vs, {0, 1});
  EXPECT_EQ(c.pages_used(), 3);
  // Sequence 0 writes row 6 into page 1, now its own: no copy either.
  c.append_step(t.ks, t.vs, {1, 0});
  EXPECT_EQ(c.pages(0), (std::vector<std::int32_t>{0, 1}));
  expect_paged_invariants(c);
}

TEST(PagedKVCache, SharedPrefixCopyOnWriteKeepsTheSourcesRows) {
  PagedKVCache c(small_paged(8, 4, 4));
  StepRows s = step_rows(c, 4, 1);
  c.append_step(s.ks, s.vs, {4, 0});
  Tensor k0 = c.read_keys(0, 0), v0 = c.read_values(1, 0);
  c.fork(0, 1, 2); // sequence 1 shares page 0, where rows 2 and 3 are sequence 0's only
  EXPECT_EQ(c.pages(1), (std::vector<std::int32_t>{0}));
  EXPECT_EQ(c.pages_used(), 1);
  StepRows t = step_rows(c, 1, 2);
  c.append_step(t.ks, t.vs, {0, 1}); // would overwrite sequence 0's row 2 without a copy
  EXPECT_EQ(c.pages(1), (std::vector<std::int32_t>{1}));
  EXPECT_TRUE(same_bytes(c.read_keys(0, 0), k0));
  EXPECT_TRUE(same_bytes(c.read_values(1, 0), v0));
  EXPECT_EQ(c.read_keys(0, 1).values(),
            concat_rows(slice(s.ks[0], 0, 0, 2), slice(t.ks[0], 1, 0, 1), 2));
  expect_paged_invariants(c);
}

TEST(PagedKVCache, SharersWritingInOneStepCopyOnce) {
  PagedKVCache c(small_paged(2, 4, 1)); // a pool of 2 pages
  StepRows s = step_rows(c, 2, 1);
  c.append_step(s.ks, s.vs, {2, 0});
  c.fork(0, 1);
  EXPECT_EQ(c.free_pages(), 1);
  StepRows t = step_rows(c, 1, 2);
  // Both write into shared page 0: one copy, and the last writer keeps the page, so the
  // one free page is enough.
  c.append_step(t.ks, t.vs);
  EXPECT_EQ(c.pages(0), (std::vector<std::int32_t>{1}));
  EXPECT_EQ(c.pages(1), (std::vector<std::int32_t>{0}));
  EXPECT_EQ(c.free_pages(), 0);
  Model m(c);
  for (std::int64_t l = 0; l < 2; ++l)
    m.append(l, s.ks[l], s.vs[l], {2, 0});
  m.fork(0, 1, 2);
  for (std::int64_t l = 0; l < 2; ++l)
    m.append(l, t.ks[l], t.vs[l], {1, 1});
  expect_matches(c, m);
  expect_paged_invariants(c);
  // Only writers copy: a sharer that sits the step out keeps the original page.
  c.fork(0, 1); // sequence 1 lets page 0 go and shares page 1
  EXPECT_EQ(c.free_pages(), 1);
  c.append_step(t.ks, t.vs, {1, 0});
  EXPECT_EQ(c.pages(0), (std::vector<std::int32_t>{0}));
  EXPECT_EQ(c.pages(1), (std::vector<std::int32_t>{1}));
  EXPECT_EQ(c.free_pages(), 0);
}

TEST(PagedKVCache, PagesAreFreedWhenNoLongerHeld) {
  PagedKVCache c(small_paged(8, 2, 4));
  StepRows s = step_rows(c, 7, 1);
  c.append_step(s.ks, s.vs, {7, 3}); // 4 + 2 pages
  EXPECT_EQ(c.free_pages(), 2);
  c.truncate(0, 5); // drops page 3
  EXPECT_EQ(c.free_pages(), 3);
  c.truncate(0, 4); // drops page 2
  EXPECT_EQ(c.free_pages(), 4);
  c.truncate(0, 3); // page 1 still holds row 2
  EXPECT_EQ(c.free_pages(), 4);
  c.fork(0, 1); // sequence 1's two pages go, sequence 0's two are shared
  EXPECT_EQ(c.free_pages(), 6);
  c.reset(0); // still held by sequence 1
  EXPECT_EQ(c.free_pages(), 6);
  EXPECT_EQ(c.read_keys(1, 1).values(), slice(s.ks[1], 0, 0, 3));
  c.truncate(1, 0);
  EXPECT_EQ(c.free_pages(), 8);
  expect_paged_invariants(c);
  c.append_step(s.ks, s.vs, {7, 3});
  c.fork(1, 0, 1);
  c.reset();
  expect_same(snapshot(c, false), snapshot(PagedKVCache(small_paged(8, 2, 4)), false));
}

TEST(PagedKVCache, AbortStepReturnsPagesAndUndoesCopies) {
  PagedKVCache c(small_paged(8, 4, 4));
  StepRows s = step_rows(c, 3, 1);
  c.append_step(s.ks, s.vs, {3, 0});
  c.fork(0, 1);
  Snapshot before = snapshot(c, false);
  StepRows t = step_rows(c, 6, 2);
  c.append(1, t.ks[1], t.vs[1], {2, 6}); // sequence 0: a copy, a new page; 1: two new pages
  EXPECT_EQ(c.pages_used(), 5);
  EXPECT_EQ(c.pages(0), (std::vector<std::int32_t>{1, 2}));
  EXPECT_EQ(c.pages(1), (std::vector<std::int32_t>{0, 3, 4}));
  EXPECT_EQ(c.length(1), 3);
  c.abort_step();
  expect_same(snapshot(c, false), before);
  Model m(c);
  for (std::int64_t l = 0; l < 2; ++l)
    m.append(l, s.ks[l], s.vs[l], {3, 0});
  m.fork(0, 1, 3);
  expect_matches(c, m);
}

TEST(PagedKVCache, AbortStepRestoresRowsTheKeeperOverwrote) {
  PagedKVCache c(small_paged(8, 4, 4));
  StepRows s = step_rows(c, 2, 1);
  c.append_step(s.ks, s.vs, {2, 0});
  c.fork(0, 1, 1); // page 0: row 0 shared, row 1 sequence 0's only
  Tensor k0 = c.read_keys(0, 0), v0 = c.read_values(1, 0);
  StepRows t = step_rows(c, 1, 2);
  // Both write into page 0: sequence 0 copies it away, sequence 1 keeps it and writes its
  // row 1 there, over sequence 0's row 1.
  c.append(0, t.ks[0], t.vs[0]);
  c.append(1, t.ks[1], t.vs[1]);
  EXPECT_EQ(c.pages(0), (std::vector<std::int32_t>{1}));
  EXPECT_EQ(c.pages(1), (std::vector<std::int32_t>{0}));
  c.abort_step(); // sequence 0 is back on page 0, with its own row 1
  EXPECT_EQ(c.pages(0), (std::vector<std::int32_t>{0}));
  EXPECT_TRUE(same_bytes(c.read_keys(0, 0), k0));
  EXPECT_TRUE(same_bytes(c.read_values(1, 0), v0));
  expect_paged_invariants(c);
}

TEST(PagedKVCache, TruncateThenAppendEqualsNeverAppended) {
  PagedKVCache spec(small_paged(8, 2, 4)), plain(small_paged(8, 2, 4));
  truncate_then_append(spec, plain);
  expect_same(snapshot(spec, false), snapshot(plain, false)); // the same pages, too
}

TEST(PagedKVCache, Errors) {
  auto make = [](PagedKVCacheConfig cfg) { PagedKVCache c(cfg); };
  PagedKVCacheConfig cfg = small_paged();
  cfg.page_size = 0;
  EXPECT_TRUE(
      ErrorSays([&] { make(cfg); }, {"paged KV cache 'p'", "page_size must be at least 1"}));
  cfg = small_paged(1ll << 31);
  EXPECT_TRUE(ErrorSays([&] { make(cfg); }, {"num_pages 2147483648 does not fit"}));
  cfg = small_paged(4, 4, -1);
  EXPECT_TRUE(ErrorSays([&] { make(cfg); }, {"max_pages_per_seq must be at least 0"}));
  cfg = small_paged(4, 4, 0);
  PagedKVCache c(cfg);
  EXPECT_EQ(c.max_pages_per_seq(), 4); // 0: the whole pool
  EXPECT_EQ(c.capacity(), 16);
  EXPECT_TRUE(ErrorSays([&] { c.refcount(4); }, {"refcount: page 4 is out of range", "4 pages"}));
  EXPECT_TRUE(ErrorSays([&] { c.key_pool(2); }, {"key_pool: layer 2 is out of range"}));
  EXPECT_TRUE(ErrorSays([&] { c.pages(2); }, {"pages: sequence 2 is out of range"}));
}

TEST(KVCaches, ContiguousAndPagedAgree) {
  KVCache a(small_config(16));
  PagedKVCache p(small_paged(12, 3, 6)); // 6 pages of 3 rows per sequence hold 16 rows
  std::mt19937_64 rng(7);
  for (int step = 0; step < 12; ++step) {
    std::int64_t n = 1 + static_cast<std::int64_t>(rng() % 3);
    std::vector<std::int64_t> counts;
    for (std::int64_t b = 0; b < 2; ++b)
      counts.push_back(std::min<std::int64_t>(static_cast<std::int64_t>(rng() % (n + 1)),
                                              a.capacity() - a.length(b)));
    StepRows s = step_rows(a, n, 10 + step);
    a.append_step(s.ks, s.vs, counts);
    p.append_step(s.ks, s.vs, counts);
    for (std::int64_t l = 0; l < 2; ++l)
      for (std::int64_t b = 0; b < 2; ++b) {
        EXPECT_TRUE(same_bytes(a.read_keys(l, b), p.read_keys(l, b)));
        EXPECT_TRUE(same_bytes(a.read_values(l, b), p.read_values(l, b)));
      }
  }
  EXPECT_TRUE(same_bytes(a.lengths(), p.lengths()));
}

// ---- property: random operations against the model -------------------------------------

struct Random {
  std::mt19937_64 rng;
  std::int64_t pick(std::int64_t lo, std::int64_t hi) { // inclusive
    return lo + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(hi - lo + 1));
  }
};

Snapshot snap(const KVCacheBase &c, bool pools) {
  if (const auto *p = dynamic_cast<const PagedKVCache *>(&c))
    return snapshot(*p, pools);
  return snapshot(dynamic_cast<const KVCache &>(c));
}

/// Appends the step's rows layer by layer in a random order, then advances.
void layer_by_layer(Random &r, KVCacheBase &c, const StepRows &s,
                    const std::vector<std::int64_t> &counts) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(c.layers()));
  for (std::size_t l = 0; l < order.size(); ++l)
    order[l] = static_cast<std::int64_t>(l);
  std::shuffle(order.begin(), order.end(), r.rng);
  for (std::int64_t l : order)
    c.append(l, s.ks[l], s.vs[l], counts);
  c.advance();
}

/// A random step (whole or layer by layer) on every cache; past a capacity it must fail
/// and change nothing. Returns whether it fit.
bool random_step(Random &r, const std::vector<KVCacheBase *> &caches, Model &m,
                 std::uint64_t seed) {
  const KVCacheBase &first = *caches[0];
  std::int64_t n = r.pick(0, 5);
  std::vector<std::int64_t> counts;
  bool fits = true;
  for (std::int64_t b = 0; b < m.batch; ++b) {
    counts.push_back(r.pick(0, n));
    fits = fits && m.length(b) + counts.back() <= first.capacity();
  }
  StepRows s = step_rows(first, n, seed);
  bool whole = r.pick(0, 1) == 0;
  for (KVCacheBase *c : caches) {
    Snapshot before = snap(*c, true);
    auto run = [&] {
      if (whole)
        c->append_step(s.ks, s.vs, counts);
      else
        layer_by_layer(r, *c, s, counts);
    };
    if (fits) {
      run();
    } else {
      EXPECT_TRUE(ErrorSays(run, {"capacity of " + std::to_string(c->capacity())}));
      expect_same(snap(*c, true), before);
    }
  }
  for (std::int64_t l = 0; fits && l < m.layers; ++l)
    m.append(l, s.ks[l], s.vs[l], counts);
  return fits;
}

/// Appends some layers of a step that fits, then aborts it: nothing changes.
void random_aborted_step(Random &r, const std::vector<KVCacheBase *> &caches, const Model &m,
                         std::uint64_t seed) {
  std::int64_t n = r.pick(1, 4);
  std::vector<std::int64_t> counts;
  for (std::int64_t b = 0; b < m.batch; ++b)
    counts.push_back(std::min(r.pick(0, n), caches[0]->capacity() - m.length(b)));
  StepRows s = step_rows(*caches[0], n, seed);
  std::int64_t layers = r.pick(1, m.layers);
  for (KVCacheBase *c : caches) {
    Snapshot before = snap(*c, false);
    for (std::int64_t l = 0; l < layers; ++l)
      c->append(l, s.ks[l], s.vs[l], counts);
    c->abort_step();
    expect_same(snap(*c, false), before);
  }
}

/// Truncate, reset or fork, on every cache and the model.
void random_edit(Random &r, const std::vector<KVCacheBase *> &caches, Model &m) {
  std::int64_t b = r.pick(0, m.batch - 1), other = (b + r.pick(1, m.batch - 1)) % m.batch;
  switch (r.pick(0, 4)) {
  case 0:
  case 1: {
    std::int64_t n = r.pick(0, m.length(b));
    for (KVCacheBase *c : caches)
      c->truncate(b, n);
    m.truncate(b, n);
    return;
  }
  case 2:
    if (r.pick(0, 3) == 0) {
      for (KVCacheBase *c : caches)
        c->reset();
      for (std::int64_t i = 0; i < m.batch; ++i)
        m.truncate(i, 0);
    } else {
      for (KVCacheBase *c : caches)
        c->reset(b);
      m.truncate(b, 0);
    }
    return;
  default: {
    bool whole = r.pick(0, 1) == 0;
    std::int64_t n = whole ? m.length(b) : r.pick(0, m.length(b));
    for (KVCacheBase *c : caches)
      whole ? c->fork(b, other) : c->fork(b, other, n);
    m.fork(b, other, n);
  }
  }
}

TEST(KVCaches, RandomOperationsMatchTheModel) {
  int overflows = 0, forks_shared = 0;
  for (std::uint64_t seed = 1; seed <= 24; ++seed) {
    Random r{std::mt19937_64(seed)};
    KVCacheConfig dense_config{
        .name = "dense", .layers = 2, .batch = 3, .kv_heads = 2, .head_dim = 2, .capacity = 12};
    // Pages of 3 rows, 4 per sequence: the same capacity, and a pool of B * 4 pages that
    // never runs out (each sequence holds at most 4, and the pool's used pages are held).
    PagedKVCacheConfig paged_config{.name = "paged",
                                    .layers = 2,
                                    .batch = 3,
                                    .kv_heads = 2,
                                    .head_dim = 2,
                                    .page_size = 3,
                                    .num_pages = 12,
                                    .max_pages_per_seq = 4};
    KVCache dense(dense_config);
    PagedKVCache paged(paged_config);
    std::vector<KVCacheBase *> caches{&dense, &paged};
    Model m(dense);
    for (int op = 0; op < 150; ++op) {
      SCOPED_TRACE("seed " + std::to_string(seed) + ", operation " + std::to_string(op));
      std::int64_t kind = r.pick(0, 9);
      if (kind < 5)
        overflows += !random_step(r, caches, m, seed * 1000 + op);
      else if (kind == 5)
        random_aborted_step(r, caches, m, seed * 1000 + op);
      else
        random_edit(r, caches, m);
      forks_shared += paged.pages_used() < std::ssize(paged.pages(0)) + std::ssize(paged.pages(1)) +
                                               std::ssize(paged.pages(2));
      expect_matches(dense, m);
      expect_matches(paged, m);
      expect_paged_invariants(paged);
      expect_zero_past_lengths(dense);
      if (HasFailure())
        return;
    }
  }
  EXPECT_GT(overflows, 100);    // the runs exercised the error path
  EXPECT_GT(forks_shared, 500); // and pages shared between sequences
}

TEST(PagedKVCache, RandomOperationsWithASmallPool) {
  // 3 sequences of up to 4 pages of 2 rows over a pool of 5: steps run out of pages. A step
  // must fail when even its new pages do not fit, may fail only when they and one copy
  // per sequence would not, and must then change nothing.
  int exhausted = 0;
  for (std::uint64_t seed = 1; seed <= 24; ++seed) {
    Random r{std::mt19937_64(seed)};
    PagedKVCache c({.name = "small",
                    .layers = 2,
                    .batch = 3,
                    .kv_heads = 1,
                    .head_dim = 2,
                    .page_size = 2,
                    .num_pages = 5,
                    .max_pages_per_seq = 4});
    Model m(c);
    for (int op = 0; op < 150; ++op) {
      SCOPED_TRACE("seed " + std::to_string(seed) + ", operation " + std::to_string(op));
      if (r.pick(0, 2) != 0) {
        random_edit(r, {&c}, m);
      } else {
        std::int64_t n = r.pick(1, 4), least = 0, most = 0;
        std::vector<std::int64_t> counts;
        for (std::int64_t b = 0; b < 3; ++b) {
          std::int64_t len = m.length(b);
          counts.push_back(std::min(r.pick(0, n), c.capacity() - len));
          std::int64_t fresh = (len + counts[b] + 1) / 2 - (len + 1) / 2;
          least += fresh;
          most += fresh + (counts[b] > 0 && len % 2 != 0);
        }
        StepRows s = step_rows(c, n, seed * 1000 + op);
        Snapshot before = snapshot(c);
        try {
          c.append_step(s.ks, s.vs, counts);
          EXPECT_LE(least, before.numbers[1]) << "fit in fewer free pages than it needs";
          for (std::int64_t l = 0; l < 2; ++l)
            m.append(l, s.ks[l], s.vs[l], counts);
        } catch (const Error &e) {
          EXPECT_GT(most, before.numbers[1]) << "ran out of pages with enough free: " << e.what();
          EXPECT_NE(std::string(e.what()).find("free pages"), std::string::npos) << e.what();
          expect_same(snapshot(c), before);
          ++exhausted;
        }
      }
      expect_matches(c, m);
      expect_paged_invariants(c);
      if (HasFailure())
        return;
    }
  }
  EXPECT_GT(exhausted, 100);
}

} // namespace
} // namespace qkv
