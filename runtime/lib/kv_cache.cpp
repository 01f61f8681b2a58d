// KV caches: the step protocol and checks shared by both layouts, the contiguous cache,
// and the paged cache with its page pool, block table, refcounts and copy-on-write.
#include <qkv/runtime/kv_cache.hpp>

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>

namespace qkv {

namespace {

std::string num(std::int64_t v) { return std::to_string(v); }

std::string list(const std::vector<std::int64_t> &v) {
  std::string r = "[";
  for (std::size_t i = 0; i < v.size(); ++i)
    r += (i ? ", " : "") + num(v[i]);
  return r + "]";
}

void check_positive(const std::string &who, const char *field, std::int64_t v) {
  if (v < 1)
    user_error(who + ": " + field + " must be at least 1, got " + num(v));
}

/// The paged cache's capacity per sequence, after checking its page geometry.
std::int64_t paged_capacity(const PagedKVCacheConfig &c) {
  std::string who = "paged KV cache '" + c.name + "'";
  check_positive(who, "page_size", c.page_size);
  check_positive(who, "num_pages", c.num_pages);
  if (c.num_pages > std::numeric_limits<std::int32_t>::max())
    user_error(who + ": num_pages " + num(c.num_pages) +
               " does not fit the int32 block table's page ids");
  if (c.max_pages_per_seq < 0)
    user_error(who + ": max_pages_per_seq must be at least 0 (0: num_pages), got " +
               num(c.max_pages_per_seq));
  std::int64_t pages = c.max_pages_per_seq ? c.max_pages_per_seq : c.num_pages;
  std::int64_t rows;
  if (__builtin_mul_overflow(pages, c.page_size, &rows))
    user_error(who + ": max_pages_per_seq * page_size overflows int64");
  return rows;
}

} // namespace

// ---- KVCacheBase: lengths, steps, checks ------------------------------------------------

KVCacheBase::KVCacheBase(std::string kind, std::string name, std::int64_t layers,
                         std::int64_t batch, std::int64_t kv_heads, std::int64_t head_dim,
                         std::int64_t capacity, DType dtype)
    : kind_(std::move(kind)), name_(std::move(name)), layers_(layers), batch_(batch),
      kv_heads_(kv_heads), head_dim_(head_dim), capacity_(capacity), dtype_(dtype) {
  check_positive(who(), "layers", layers);
  check_positive(who(), "batch", batch);
  check_positive(who(), "kv_heads", kv_heads);
  check_positive(who(), "head_dim", head_dim);
  check_positive(who(), "capacity", capacity);
  if (!is_float(dtype))
    user_error(who() + ": holds floats (f32, f64, f16, bf16), not " +
               std::string(dtype_name(dtype)));
  lengths_ = Tensor(DType::I64, {batch});
  step_.appended.assign(static_cast<std::size_t>(layers), false);
}

std::string KVCacheBase::who() const { return kind_ + " '" + name_ + "'"; }

std::int64_t KVCacheBase::row_bytes() const {
  return head_dim_ * static_cast<std::int64_t>(dtype_size(dtype_));
}

void KVCacheBase::check_layer(std::int64_t layer, const char *op) const {
  if (layer < 0 || layer >= layers_)
    user_error(who() + ": " + op + ": layer " + num(layer) + " is out of range (the cache has " +
               num(layers_) + " layers)");
}

void KVCacheBase::check_sequence(std::int64_t b, const char *op) const {
  if (b < 0 || b >= batch_)
    user_error(who() + ": " + op + ": sequence " + num(b) + " is out of range (the cache holds " +
               num(batch_) + " sequences)");
}

void KVCacheBase::check_no_step(const std::string &op) const {
  if (!step_.open)
    return;
  std::vector<std::int64_t> done;
  for (std::int64_t l = 0; l < layers_; ++l)
    if (step_.appended[l])
      done.push_back(l);
  user_error(who() + ": " + op + " while a step is open (layers appended so far: " + list(done) +
             "); call advance() or abort_step() first");
}

std::int64_t KVCacheBase::length(std::int64_t b) const {
  check_sequence(b, "length");
  return lengths_data()[b];
}

std::vector<std::int64_t> KVCacheBase::resolve_counts(const std::vector<std::int64_t> &counts,
                                                      std::int64_t n, const std::string &op) const {
  if (counts.empty()) {
    if (n < 0)
      user_error(who() + ": " + op + ": needs one count per sequence (" + num(batch_) + ")");
    return std::vector<std::int64_t>(static_cast<std::size_t>(batch_), n);
  }
  if (static_cast<std::int64_t>(counts.size()) != batch_)
    user_error(who() + ": " + op + ": " + num(static_cast<std::int64_t>(counts.size())) +
               " counts " + list(counts) + " for " + num(batch_) + " sequences");
  for (std::int64_t b = 0; b < batch_; ++b)
    if (counts[b] < 0 || (n >= 0 && counts[b] > n))
      user_error(who() + ": " + op + ": count " + num(counts[b]) + " for sequence " + num(b) +
                 (n >= 0 ? " is not in [0, n=" + num(n) + "] (the new rows per sequence)"
                         : " is negative"));
  return counts;
}

std::int64_t KVCacheBase::check_rows(std::int64_t layer, const Tensor &k, const Tensor &v) const {
  std::string where = who() + ", layer " + num(layer);
  auto check = [&](const Tensor &t, const char *what) {
    if (t.empty())
      user_error(where + ": the new " + what + " are an empty tensor");
    const Shape &s = t.shape();
    if (t.dtype() != dtype_ || s.size() != 4 || s[0] != batch_ || s[1] != kv_heads_ ||
        s[3] != head_dim_)
      user_error(where + ": the new " + what + " are " + t.type_str() + "; the cache takes " +
                 std::string(dtype_name(dtype_)) + " (B=" + num(batch_) +
                 ", Hkv=" + num(kv_heads_) + ", n, Dh=" + num(head_dim_) + ")");
  };
  check(k, "keys");
  check(v, "values");
  if (k.shape()[2] != v.shape()[2])
    user_error(where + ": the new keys have " + num(k.shape()[2]) + " rows per sequence, the new " +
               "values " + num(v.shape()[2]));
  return k.shape()[2];
}

void KVCacheBase::check_capacity(const std::vector<std::int64_t> &counts) const {
  for (std::int64_t b = 0; b < batch_; ++b) {
    std::int64_t len = lengths_data()[b];
    if (counts[b] > capacity_ - len)
      user_error(who() + ": sequence " + num(b) + " holds " + num(len) + " rows; appending " +
                 num(counts[b]) + " would make " + num(len + counts[b]) +
                 ", more than its capacity of " + num(capacity_) + " (nothing was written)");
  }
}

void KVCacheBase::begin_step(const std::vector<std::int64_t> &counts) {
  check_no_step("begin_step");
  std::vector<std::int64_t> c = resolve_counts(counts, -1, "begin_step");
  check_capacity(c);
  reserve(c);
  step_.open = true;
  step_.counts = std::move(c);
  std::fill(step_.appended.begin(), step_.appended.end(), false);
}

void KVCacheBase::append(std::int64_t layer, const Tensor &k, const Tensor &v,
                         const std::vector<std::int64_t> &counts) {
  check_layer(layer, "append");
  std::int64_t n = check_rows(layer, k, v);
  std::string op = "append to layer " + num(layer);
  if (!step_.open) {
    begin_step(resolve_counts(counts, n, op));
  } else {
    if (step_.appended[layer])
      user_error(who() + ": layer " + num(layer) +
                 " has already appended in this step; advance() ends the step");
    if (!counts.empty() && resolve_counts(counts, n, op) != step_.counts)
      user_error(who() + ": " + op + ": counts " + list(counts) + " differ from the step's " +
                 list(step_.counts));
    for (std::int64_t b = 0; b < batch_; ++b)
      if (step_.counts[b] > n)
        user_error(who() + ": " + op + ": the step appends " + num(step_.counts[b]) +
                   " rows to sequence " + num(b) + " but the new keys hold " + num(n));
  }
  write(layer, k, v, step_.counts);
  step_.appended[layer] = true;
}

void KVCacheBase::advance() {
  if (!step_.open)
    user_error(who() + ": advance() without an open step (append or begin_step opens one)");
  std::vector<std::int64_t> missing;
  for (std::int64_t l = 0; l < layers_; ++l)
    if (!step_.appended[l])
      missing.push_back(l);
  if (!missing.empty())
    user_error(who() + ": advance() before layers " + list(missing) + " appended (every layer " +
               "appends once per step; abort_step() drops the step)");
  std::int64_t *len = lengths_data();
  for (std::int64_t b = 0; b < batch_; ++b)
    len[b] += step_.counts[b];
  step_.open = false;
}

void KVCacheBase::abort_step() {
  if (!step_.open)
    return;
  unreserve();
  step_.open = false;
}

void KVCacheBase::append_step(const std::vector<Tensor> &ks, const std::vector<Tensor> &vs,
                              const std::vector<std::int64_t> &counts) {
  check_no_step("append_step");
  if (static_cast<std::int64_t>(ks.size()) != layers_ ||
      static_cast<std::int64_t>(vs.size()) != layers_)
    user_error(who() + ": append_step: " + num(static_cast<std::int64_t>(ks.size())) +
               " key tensors and " + num(static_cast<std::int64_t>(vs.size())) +
               " value tensors for " + num(layers_) + " layers");
  std::int64_t n = check_rows(0, ks[0], vs[0]);
  for (std::int64_t l = 1; l < layers_; ++l)
    if (std::int64_t nl = check_rows(l, ks[l], vs[l]); nl != n)
      user_error(who() + ": append_step: layer " + num(l) + "'s new keys have " + num(nl) +
                 " rows per sequence, layer 0's " + num(n));
  begin_step(resolve_counts(counts, n, "append_step"));
  for (std::int64_t l = 0; l < layers_; ++l) {
    write(l, ks[l], vs[l], step_.counts);
    step_.appended[l] = true;
  }
  advance();
}

void KVCacheBase::truncate(std::int64_t b, std::int64_t new_length) {
  check_no_step("truncate(" + num(b) + ", " + num(new_length) + ")");
  check_sequence(b, "truncate");
  std::int64_t len = lengths_data()[b];
  if (new_length < 0 || new_length > len)
    user_error(who() + ": truncate: sequence " + num(b) + " holds " + num(len) +
               " rows; cannot truncate it to " + num(new_length));
  if (new_length == len)
    return;
  drop(b, new_length);
  lengths_data()[b] = new_length;
}

void KVCacheBase::reset(std::int64_t b) {
  check_no_step("reset(" + num(b) + ")");
  check_sequence(b, "reset");
  drop(b, 0);
  lengths_data()[b] = 0;
}

void KVCacheBase::reset() {
  check_no_step("reset()");
  for (std::int64_t b = 0; b < batch_; ++b) {
    drop(b, 0);
    lengths_data()[b] = 0;
  }
}

void KVCacheBase::fork(std::int64_t src, std::int64_t dst) {
  check_sequence(src, "fork");
  fork(src, dst, lengths_data()[src]);
}

void KVCacheBase::fork(std::int64_t src, std::int64_t dst, std::int64_t prefix_length) {
  check_no_step("fork(" + num(src) + ", " + num(dst) + ")");
  check_sequence(src, "fork");
  check_sequence(dst, "fork");
  if (src == dst)
    user_error(who() + ": fork: source and destination are both sequence " + num(src));
  std::int64_t len = lengths_data()[src];
  if (prefix_length < 0 || prefix_length > len)
    user_error(who() + ": fork: sequence " + num(src) + " holds " + num(len) +
               " rows; cannot share a prefix of " + num(prefix_length));
  drop(dst, 0);
  lengths_data()[dst] = 0;
  share(src, dst, prefix_length);
  lengths_data()[dst] = prefix_length;
}

Tensor KVCacheBase::read(std::int64_t layer, std::int64_t b, bool values) const {
  const char *op = values ? "read_values" : "read_keys";
  check_layer(layer, op);
  check_sequence(b, op);
  Tensor out = Tensor::uninitialized(dtype_, {kv_heads_, lengths_data()[b], head_dim_});
  gather(layer, b, values, out);
  return out;
}

Tensor KVCacheBase::read_keys(std::int64_t layer, std::int64_t b) const {
  return read(layer, b, false);
}

Tensor KVCacheBase::read_values(std::int64_t layer, std::int64_t b) const {
  return read(layer, b, true);
}

// ---- KVCache: (B, Hkv, capacity, Dh) per layer ------------------------------------------

KVCache::KVCache(const KVCacheConfig &c)
    : KVCacheBase("KV cache", c.name, c.layers, c.batch, c.kv_heads, c.head_dim, c.capacity,
                  c.dtype) {
  for (std::int64_t l = 0; l < layers(); ++l) {
    keys_.emplace_back(dtype(), Shape{batch(), kv_heads(), capacity(), head_dim()});
    values_.emplace_back(dtype(), Shape{batch(), kv_heads(), capacity(), head_dim()});
  }
}

const Tensor &KVCache::keys(std::int64_t layer) const {
  check_layer(layer, "keys");
  return keys_[layer];
}

const Tensor &KVCache::values(std::int64_t layer) const {
  check_layer(layer, "values");
  return values_[layer];
}

std::int64_t KVCache::row(std::int64_t b, std::int64_t h, std::int64_t j) const {
  return ((b * kv_heads() + h) * capacity() + j) * row_bytes();
}

void KVCache::reserve(const std::vector<std::int64_t> &) {} // the capacity check suffices

void KVCache::write(std::int64_t layer, const Tensor &k, const Tensor &v,
                    const std::vector<std::int64_t> &counts) {
  std::int64_t n = k.shape()[2];
  for (auto [src, dst] : {std::pair{&k, &keys_[layer]}, std::pair{&v, &values_[layer]}}) {
    auto *from = static_cast<const std::byte *>(src->data());
    auto *to = static_cast<std::byte *>(dst->data());
    for (std::int64_t b = 0; b < batch(); ++b)
      for (std::int64_t h = 0; h < kv_heads(); ++h)
        std::memcpy(to + row(b, h, lengths_data()[b]),
                    from + (b * kv_heads() + h) * n * row_bytes(),
                    static_cast<std::size_t>(counts[b] * row_bytes()));
  }
}

void KVCache::clear_rows(std::int64_t b, std::int64_t from, std::int64_t to) {
  if (to <= from)
    return;
  for (std::int64_t l = 0; l < layers(); ++l)
    for (Tensor *t : {&keys_[l], &values_[l]})
      for (std::int64_t h = 0; h < kv_heads(); ++h)
        std::memset(static_cast<std::byte *>(t->data()) + row(b, h, from), 0,
                    static_cast<std::size_t>((to - from) * row_bytes()));
}

void KVCache::unreserve() {
  for (std::int64_t b = 0; b < batch(); ++b)
    clear_rows(b, lengths_data()[b], lengths_data()[b] + step().counts[b]);
}

void KVCache::drop(std::int64_t b, std::int64_t new_length) {
  clear_rows(b, new_length, lengths_data()[b]);
}

void KVCache::share(std::int64_t src, std::int64_t dst, std::int64_t n) {
  for (std::int64_t l = 0; l < layers(); ++l)
    for (Tensor *t : {&keys_[l], &values_[l]})
      for (std::int64_t h = 0; h < kv_heads(); ++h) {
        auto *base = static_cast<std::byte *>(t->data());
        std::memcpy(base + row(dst, h, 0), base + row(src, h, 0),
                    static_cast<std::size_t>(n * row_bytes()));
      }
}

void KVCache::gather(std::int64_t layer, std::int64_t b, bool values, Tensor &out) const {
  auto *from = static_cast<const std::byte *>((values ? values_ : keys_)[layer].data());
  auto *to = static_cast<std::byte *>(out.data());
  std::int64_t len = lengths_data()[b];
  for (std::int64_t h = 0; h < kv_heads(); ++h)
    std::memcpy(to + h * len * row_bytes(), from + row(b, h, 0),
                static_cast<std::size_t>(len * row_bytes()));
}

// ---- PagedKVCache: a page pool per layer, one block table --------------------------------

PagedKVCache::PagedKVCache(const PagedKVCacheConfig &c)
    : KVCacheBase("paged KV cache", c.name, c.layers, c.batch, c.kv_heads, c.head_dim,
                  paged_capacity(c), c.dtype),
      page_size_(c.page_size), num_pages_(c.num_pages),
      max_pages_(c.max_pages_per_seq ? c.max_pages_per_seq : c.num_pages) {
  Shape pool{num_pages_, kv_heads(), page_size_, head_dim()};
  for (std::int64_t l = 0; l < layers(); ++l) {
    key_pools_.emplace_back(dtype(), pool);
    value_pools_.emplace_back(dtype(), pool);
  }
  table_ = Tensor(DType::I32, {batch(), max_pages_});
  std::fill_n(table_.data_as<std::int32_t>(), table_.numel(), -1);
  refcounts_.assign(static_cast<std::size_t>(num_pages_), 0);
  for (std::int64_t p = 0; p < num_pages_; ++p)
    free_.insert(free_.end(), static_cast<std::int32_t>(p));
}

const Tensor &PagedKVCache::key_pool(std::int64_t layer) const {
  check_layer(layer, "key_pool");
  return key_pools_[layer];
}

const Tensor &PagedKVCache::value_pool(std::int64_t layer) const {
  check_layer(layer, "value_pool");
  return value_pools_[layer];
}

std::int32_t PagedKVCache::refcount(std::int64_t page) const {
  if (page < 0 || page >= num_pages_)
    user_error(who() + ": refcount: page " + num(page) + " is out of range (the pool has " +
               num(num_pages_) + " pages)");
  return refcounts_[page];
}

std::vector<std::int32_t> PagedKVCache::pages(std::int64_t b) const {
  check_sequence(b, "pages");
  const std::int32_t *r = table_row(b);
  return {r, std::find(r, r + max_pages_, -1)};
}

std::int64_t PagedKVCache::slot(std::int64_t page, std::int64_t h, std::int64_t s) const {
  return ((page * kv_heads() + h) * page_size_ + s) * row_bytes();
}

std::int32_t PagedKVCache::allocate() {
  if (free_.empty())
    internal_error("PagedKVCache::allocate: no free page after the step's pages were counted");
  std::int32_t p = *free_.begin();
  free_.erase(free_.begin());
  refcounts_[p] = 1;
  return p;
}

void PagedKVCache::release(std::int32_t page) {
  if (--refcounts_[page] == 0)
    free_.insert(page);
}

void PagedKVCache::copy_page(std::int32_t from, std::int32_t to) {
  std::int64_t bytes = slot(1, 0, 0);
  for (std::int64_t l = 0; l < layers(); ++l)
    for (Tensor *t : {&key_pools_[l], &value_pools_[l]}) {
      auto *base = static_cast<std::byte *>(t->data());
      std::memcpy(base + to * bytes, base + from * bytes, static_cast<std::size_t>(bytes));
    }
}

void PagedKVCache::reserve(const std::vector<std::int64_t> &counts) {
  // Count every page the step needs (new pages, and a private copy of each shared page a
  // sequence would write into) before taking any, so that running out changes nothing.
  // Sharers of one page are visited in order and the last writer keeps the original.
  std::map<std::int32_t, std::int32_t> copied; // page -> copies taken from it so far
  std::int64_t needed = 0;
  std::string parts;
  for (std::int64_t b = 0; b < batch(); ++b) {
    if (counts[b] == 0)
      continue;
    std::int64_t len = lengths_data()[b];
    std::int64_t fresh = pages_for(len + counts[b]) - pages_for(len), cow = 0;
    if (len % page_size_ != 0) {
      std::int32_t p = table_row(b)[pages_for(len) - 1];
      if (refcounts_[p] - copied[p] > 1) {
        cow = 1;
        ++copied[p];
      }
    }
    needed += fresh + cow;
    if (fresh + cow)
      parts += (parts.empty() ? "" : ", ") + ("sequence " + num(b) + ": " + num(fresh)) +
               (cow ? " + 1 copy-on-write" : "");
  }
  if (needed > free_pages())
    user_error(who() + ": the step needs " + num(needed) + " free pages (" + parts + ") but only " +
               num(free_pages()) + " of " + num(num_pages_) + " are free (nothing was written)");
  step_copies_.clear();
  for (std::int64_t b = 0; b < batch(); ++b) {
    if (counts[b] == 0)
      continue;
    std::int64_t len = lengths_data()[b];
    std::int32_t *r = table_row(b);
    if (len % page_size_ != 0 && refcounts_[r[pages_for(len) - 1]] > 1) {
      std::int64_t s = pages_for(len) - 1;
      std::int32_t from = r[s], to = allocate();
      copy_page(from, to);
      release(from);
      r[s] = to;
      step_copies_.push_back({b, s, from, to});
    }
    for (std::int64_t j = pages_for(len); j < pages_for(len + counts[b]); ++j)
      r[j] = allocate();
  }
}

void PagedKVCache::write(std::int64_t layer, const Tensor &k, const Tensor &v,
                         const std::vector<std::int64_t> &counts) {
  std::int64_t n = k.shape()[2];
  for (auto [src, dst] : {std::pair{&k, &key_pools_[layer]}, std::pair{&v, &value_pools_[layer]}}) {
    auto *from = static_cast<const std::byte *>(src->data());
    auto *to = static_cast<std::byte *>(dst->data());
    for (std::int64_t b = 0; b < batch(); ++b) {
      std::int64_t len = lengths_data()[b], end = len + counts[b];
      const std::int32_t *r = table_row(b);
      for (std::int64_t h = 0; h < kv_heads(); ++h)
        for (std::int64_t j = len; j < end;) { // a run of rows within one page
          std::int64_t s = j % page_size_, run = std::min(page_size_ - s, end - j);
          std::memcpy(to + slot(r[j / page_size_], h, s),
                      from + ((b * kv_heads() + h) * n + (j - len)) * row_bytes(),
                      static_cast<std::size_t>(run * row_bytes()));
          j += run;
        }
    }
  }
}

void PagedKVCache::unreserve() {
  for (std::int64_t b = 0; b < batch(); ++b) {
    std::int64_t len = lengths_data()[b];
    std::int32_t *r = table_row(b);
    for (std::int64_t j = pages_for(len); j < pages_for(len + step().counts[b]); ++j) {
      release(r[j]);
      r[j] = -1;
    }
  }
  // The sharer that kept a page wrote into it past its own length, where a sharer that
  // copied the page away may have valid rows: those come back from the copy (which holds
  // them unchanged: the copier wrote only past its length). Sharers agree on every row
  // they hold, so nothing else in the page changes.
  for (auto it = step_copies_.rbegin(); it != step_copies_.rend(); ++it) {
    std::int64_t rows = lengths_data()[it->b] - it->slot * page_size_;
    for (std::int64_t l = 0; l < layers(); ++l)
      for (Tensor *t : {&key_pools_[l], &value_pools_[l]}) {
        auto *base = static_cast<std::byte *>(t->data());
        for (std::int64_t h = 0; h < kv_heads(); ++h)
          std::memcpy(base + slot(it->from, h, 0), base + slot(it->to, h, 0),
                      static_cast<std::size_t>(rows * row_bytes()));
      }
    table_row(it->b)[it->slot] = it->from;
    ++refcounts_[it->from];
    release(it->to);
  }
  step_copies_.clear();
}

void PagedKVCache::drop(std::int64_t b, std::int64_t new_length) {
  std::int32_t *r = table_row(b);
  for (std::int64_t j = pages_for(new_length); j < pages_for(lengths_data()[b]); ++j) {
    release(r[j]);
    r[j] = -1;
  }
}

void PagedKVCache::share(std::int64_t src, std::int64_t dst, std::int64_t n) {
  const std::int32_t *from = table_row(src);
  std::int32_t *to = table_row(dst);
  for (std::int64_t j = 0; j < pages_for(n); ++j) {
    to[j] = from[j];
    ++refcounts_[from[j]];
  }
}

void PagedKVCache::gather(std::int64_t layer, std::int64_t b, bool values, Tensor &out) const {
  auto *from = static_cast<const std::byte *>((values ? value_pools_ : key_pools_)[layer].data());
  auto *to = static_cast<std::byte *>(out.data());
  std::int64_t len = lengths_data()[b];
  const std::int32_t *r = table_row(b);
  for (std::int64_t h = 0; h < kv_heads(); ++h)
    for (std::int64_t j = 0; j < len;) {
      std::int64_t s = j % page_size_, run = std::min(page_size_ - s, len - j);
      std::memcpy(to + (h * len + j) * row_bytes(), from + slot(r[j / page_size_], h, s),
                  static_cast<std::size_t>(run * row_bytes()));
      j += run;
    }
}

} // namespace qkv
