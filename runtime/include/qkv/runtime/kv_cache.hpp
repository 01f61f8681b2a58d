// KV caches for decoding: the keys and values of every token a sequence has seen, per
// layer, kept so that each decode step computes K/V only for its new tokens. Two layouts,
// both a contract with the compiled decode kernels (docs/runtime.md):
//
//   KVCache       per layer a key and a value tensor (B, Hkv, capacity, Dh); sequence b's
//                 rows [0, length(b)) are valid.
//   PagedKVCache  per layer a key and a value pool (num_pages, Hkv, page_size, Dh) shared
//                 by all sequences, and one block table (B, max_pages_per_seq) int32 for all
//                 layers: key j of sequence b is row j % page_size of page
//                 block_table[b, j / page_size]. Sequences may share pages (fork); a write
//                 into a shared page copies it first.
//
// Both keep lengths() as a (B) int64 tensor that a kernel reads. New rows arrive in steps:
// each layer appends its rows once (append), then advance() moves every length at once,
// or append_step() does both for all layers. The tensors these accessors return share the
// cache's storage: the cache updates them in place, and a kernel reads them without a
// copy. Never write through them. Not thread-safe.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <qkv/runtime/tensor.hpp>

namespace qkv {

struct KVCacheConfig {
  std::string name = "kv_cache"; // named by every error message
  std::int64_t layers = 1;
  std::int64_t batch = 1;    // B: sequences
  std::int64_t kv_heads = 1; // Hkv
  std::int64_t head_dim = 1; // Dh
  std::int64_t capacity = 0; // rows per sequence
  DType dtype = DType::F32;  // any float dtype
};

struct PagedKVCacheConfig {
  std::string name = "paged_kv_cache";
  std::int64_t layers = 1;
  std::int64_t batch = 1;
  std::int64_t kv_heads = 1;
  std::int64_t head_dim = 1;
  std::int64_t page_size = 16;        // rows per page
  std::int64_t num_pages = 0;         // pages in the pool (the same page ids in every layer)
  std::int64_t max_pages_per_seq = 0; // block table width; 0: num_pages
  DType dtype = DType::F32;
};

/// What both caches share: lengths, the step protocol, truncate/reset/fork, reads. Every
/// operation checks all its arguments and the capacity (and, paged, the pool) before it
/// changes anything; a qkv::Error leaves the cache exactly as it was.
class KVCacheBase {
public:
  virtual ~KVCacheBase() = default;
  KVCacheBase(const KVCacheBase &) = delete;
  KVCacheBase &operator=(const KVCacheBase &) = delete;

  const std::string &name() const { return name_; }
  std::int64_t layers() const { return layers_; }
  std::int64_t batch() const { return batch_; }
  std::int64_t kv_heads() const { return kv_heads_; }
  std::int64_t head_dim() const { return head_dim_; }
  DType dtype() const { return dtype_; }
  /// The most rows one sequence can hold.
  std::int64_t capacity() const { return capacity_; }
  /// Sequence b's valid rows (committed by advance()).
  std::int64_t length(std::int64_t b) const;
  /// (B) int64: length(b) for every b. Moves only in advance(), truncate, reset and fork.
  const Tensor &lengths() const { return lengths_; }

  // ---- steps ---------------------------------------------------------------------------
  // A step appends rows to every layer and then advances every length once. k and v are
  // (B, Hkv, n, Dh) in the cache's dtype; counts[b] (0..n) says how many of sequence b's
  // n rows are real (the first counts[b]: a batch of prompts padded on the right to n).
  // Empty counts: all n, or the open step's counts. Rows go at each sequence's length.

  /// Opens a step for `counts` rows per sequence: checks them against the capacity (and
  /// reserves pages) for all layers at once. append() opens the step itself when none is.
  void begin_step(const std::vector<std::int64_t> &counts);
  /// Writes layer `layer`'s new rows after each sequence's valid rows, without moving the
  /// lengths (a kernel that reads lengths() still sees the old ones). Each layer appends
  /// once per step, with the step's counts.
  void append(std::int64_t layer, const Tensor &k, const Tensor &v,
              const std::vector<std::int64_t> &counts = {});
  /// Ends the step: every layer must have appended; each length grows by its count.
  void advance();
  /// Drops the open step: lengths, pages and block table as before it opened (the rows it
  /// wrote are past the lengths). Does nothing when no step is open.
  void abort_step();
  bool step_open() const { return step_.open; }
  /// One whole step: ks[l], vs[l] for every layer l, then advance(). No step may be open.
  void append_step(const std::vector<Tensor> &ks, const std::vector<Tensor> &vs,
                   const std::vector<std::int64_t> &counts = {});

  // ---- editing sequences (no step may be open) -----------------------------------------
  /// Keeps sequence b's first new_length rows (rejected speculative tokens).
  void truncate(std::int64_t b, std::int64_t new_length);
  /// Empties sequence b / every sequence.
  void reset(std::int64_t b);
  void reset();
  /// Sequence dst becomes a copy of src's first prefix_length rows (default: all of src);
  /// dst's own rows are dropped. The paged cache shares src's pages instead of copying.
  void fork(std::int64_t src, std::int64_t dst);
  void fork(std::int64_t src, std::int64_t dst, std::int64_t prefix_length);

  // ---- reading -------------------------------------------------------------------------
  /// Sequence b's valid keys / values of one layer as a new dense (Hkv, length(b), Dh)
  /// tensor in the cache's dtype.
  Tensor read_keys(std::int64_t layer, std::int64_t b) const;
  Tensor read_values(std::int64_t layer, std::int64_t b) const;

protected:
  KVCacheBase(std::string kind, std::string name, std::int64_t layers, std::int64_t batch,
              std::int64_t kv_heads, std::int64_t head_dim, std::int64_t capacity, DType dtype);
  KVCacheBase(KVCacheBase &&) = default;
  KVCacheBase &operator=(KVCacheBase &&) = default;

  /// "KV cache 'name'" / "paged KV cache 'name'": how errors begin.
  std::string who() const;
  std::int64_t row_bytes() const; // Dh elements
  std::int64_t *lengths_data() { return lengths_.data_as<std::int64_t>(); }
  const std::int64_t *lengths_data() const { return lengths_.data_as<std::int64_t>(); }

  struct Step {
    bool open = false;
    std::vector<std::int64_t> counts;
    std::vector<bool> appended; // per layer
  };
  const Step &step() const { return step_; }

  void check_layer(std::int64_t layer, const char *op) const;
  void check_sequence(std::int64_t b, const char *op) const;

private:
  /// Reserves room for `counts` more rows per sequence (after the capacity check) or
  /// throws having changed nothing.
  virtual void reserve(const std::vector<std::int64_t> &counts) = 0;
  /// Writes rows [length(b), length(b) + counts[b]) of one layer from k and v.
  virtual void write(std::int64_t layer, const Tensor &k, const Tensor &v,
                     const std::vector<std::int64_t> &counts) = 0;
  /// Undoes reserve() and any writes of the open step.
  virtual void unreserve() = 0;
  /// Drops sequence b's rows from new_length on (lengths_ not yet updated).
  virtual void drop(std::int64_t b, std::int64_t new_length) = 0;
  /// dst (already empty) takes src's first n rows (lengths_ not yet updated).
  virtual void share(std::int64_t src, std::int64_t dst, std::int64_t n) = 0;
  /// Copies sequence b's valid rows of layer's keys or values into `out` (Hkv, length, Dh).
  virtual void gather(std::int64_t layer, std::int64_t b, bool values, Tensor &out) const = 0;

  void check_no_step(const std::string &op) const;
  std::vector<std::int64_t> resolve_counts(const std::vector<std::int64_t> &counts, std::int64_t n,
                                           const std::string &op) const;
  std::int64_t check_rows(std::int64_t layer, const Tensor &k, const Tensor &v) const;
  void check_capacity(const std::vector<std::int64_t> &counts) const;
  Tensor read(std::int64_t layer, std::int64_t b, bool values) const;

  std::string kind_, name_;
  std::int64_t layers_, batch_, kv_heads_, head_dim_, capacity_;
  DType dtype_;
  Tensor lengths_;
  Step step_;
};

/// The contiguous cache: per layer keys(l) and values(l) of shape (B, Hkv, capacity, Dh),
/// row-major; sequence b's rows [0, length(b)) are valid. Outside a step every row at or
/// past a sequence's length is zero (truncate, reset and abort_step clear what they drop),
/// so the storage is a function of the valid rows alone.
class KVCache : public KVCacheBase {
public:
  explicit KVCache(const KVCacheConfig &config);
  KVCache(KVCache &&) = default;
  KVCache &operator=(KVCache &&) = default;

  const Tensor &keys(std::int64_t layer) const;
  const Tensor &values(std::int64_t layer) const;

private:
  void reserve(const std::vector<std::int64_t> &counts) override;
  void write(std::int64_t layer, const Tensor &k, const Tensor &v,
             const std::vector<std::int64_t> &counts) override;
  void unreserve() override;
  void drop(std::int64_t b, std::int64_t new_length) override;
  void share(std::int64_t src, std::int64_t dst, std::int64_t n) override;
  void gather(std::int64_t layer, std::int64_t b, bool values, Tensor &out) const override;
  /// Zeroes rows [from, to) of sequence b in every layer.
  void clear_rows(std::int64_t b, std::int64_t from, std::int64_t to);
  /// Byte offset of row j of sequence b, head h in keys(l) or values(l).
  std::int64_t row(std::int64_t b, std::int64_t h, std::int64_t j) const;

  std::vector<Tensor> keys_, values_;
};

/// The paged cache: per layer key_pool(l) and value_pool(l) of shape
/// (num_pages, Hkv, page_size, Dh), and block_table() (B, max_pages_per_seq) int32 shared
/// by all layers. Sequence b holds pages block_table[b, 0 .. ceil(length(b)/page_size)) in
/// order (during a step, up to ceil((length(b) + count)/page_size)); every other entry is
/// -1. Page ids are the same in every layer's pools. A page may be held by several
/// sequences (fork): it is freed when the last one lets it go, and a sequence about to
/// write into a shared page gets a private copy first (copy-on-write, all layers). Pages
/// are allocated lowest id first. Rows past a length hold unspecified values.
class PagedKVCache : public KVCacheBase {
public:
  explicit PagedKVCache(const PagedKVCacheConfig &config);
  PagedKVCache(PagedKVCache &&) = default;
  PagedKVCache &operator=(PagedKVCache &&) = default;

  std::int64_t page_size() const { return page_size_; }
  std::int64_t num_pages() const { return num_pages_; }
  std::int64_t max_pages_per_seq() const { return max_pages_; }
  std::int64_t free_pages() const { return static_cast<std::int64_t>(free_.size()); }
  std::int64_t pages_used() const { return num_pages_ - free_pages(); }
  /// How many sequences hold page p (0: free).
  std::int32_t refcount(std::int64_t page) const;
  /// Sequence b's pages, in order (its block table row up to the first -1).
  std::vector<std::int32_t> pages(std::int64_t b) const;

  const Tensor &key_pool(std::int64_t layer) const;
  const Tensor &value_pool(std::int64_t layer) const;
  const Tensor &block_table() const { return table_; }

private:
  struct Copy {
    std::int64_t b, slot;
    std::int32_t from, to;
  };

  void reserve(const std::vector<std::int64_t> &counts) override;
  void write(std::int64_t layer, const Tensor &k, const Tensor &v,
             const std::vector<std::int64_t> &counts) override;
  void unreserve() override;
  void drop(std::int64_t b, std::int64_t new_length) override;
  void share(std::int64_t src, std::int64_t dst, std::int64_t n) override;
  void gather(std::int64_t layer, std::int64_t b, bool values, Tensor &out) const override;

  std::int64_t pages_for(std::int64_t rows) const { return (rows + page_size_ - 1) / page_size_; }
  std::int32_t *table_row(std::int64_t b) {
    return table_.data_as<std::int32_t>() + b * max_pages_;
  }
  const std::int32_t *table_row(std::int64_t b) const {
    return table_.data_as<std::int32_t>() + b * max_pages_;
  }
  std::int32_t allocate();
  void release(std::int32_t page);
  /// Copies page `from` to page `to` in every layer's pools.
  void copy_page(std::int32_t from, std::int32_t to);
  /// Byte offset of row s of head h of a page in a pool.
  std::int64_t slot(std::int64_t page, std::int64_t h, std::int64_t s) const;

  std::int64_t page_size_, num_pages_, max_pages_;
  std::vector<Tensor> key_pools_, value_pools_;
  Tensor table_;
  std::vector<std::int32_t> refcounts_;
  std::set<std::int32_t> free_;
  std::vector<Copy> step_copies_; // the open step's copy-on-writes, to undo on abort
};

} // namespace qkv
