// Ring attention (context parallelism): attention over a sequence whose rows are split
// across the ranks, each rank holding its shard of q, k and v. The k/v shards travel
// round the ring (rank r sends to r + 1 and receives from r - 1) while each rank computes
// the partial attention of its queries over the shard it holds; the partials merge exactly
// through their log-sum-exps (Attention::lse, merge_attention, merge_lse). The result on
// each rank is its rows of attention over the whole sequence: the same as one process,
// within the f32 rule (docs/distributed.md).
#pragma once

#include <array>
#include <optional>
#include <utility>

#include <qkv/compiler/compile.hpp>
#include <qkv/dist/comm.hpp>

namespace qkv::dist {

struct RingOptions {
  /// Query i sees keys 0..i of the whole sequence. A shard of keys after all of a rank's
  /// queries is skipped (still passed on), one before them needs no mask, and the rank's
  /// own shard takes the causal mask.
  bool causal = false;
  /// The rows' layout across the ranks. Contiguous (false): rank r holds one run of rows,
  /// the ranks' runs in rank order; a causal ring is then unbalanced (rank 0's queries see
  /// one shard, the last rank's all of them). Zigzag (true): the sequence is cut into 2N
  /// chunks (zigzag_rows) and rank r holds chunks r and 2N-1-r, in that order (its first
  /// ceil(n_r / 2) rows from chunk r): every rank then attends to the same number of
  /// key blocks, causal or not.
  bool zigzag = false;
  /// The softmax scale; 1/sqrt(Dh) when unset.
  std::optional<double> scale;
  /// How the partial attention and merge kernels are compiled.
  CompileOptions compile;
};

/// What one call did on this rank.
struct RingStats {
  int steps = 0;        // shards seen (= ranks)
  int computed = 0;     // blocks (query chunk x key chunk) attended to; causal skips
                        // those whose keys all follow every query
  double compute_s = 0; // partial attention kernels
  double merge_s = 0;   // merge kernels
  double wait_s = 0;    // waiting for the next shard, after the compute
  std::int64_t bytes_sent = 0;
  double total_s = 0;
};

/// The global rows [first, last) of rank `rank`'s two chunks of a sequence of `length`
/// rows under the zigzag layout (2 * ranks chunks, sizes as even as the length allows, the
/// longer ones first): rank r's tensors hold the first range's rows, then the second's.
std::array<std::pair<std::int64_t, std::int64_t>, 2> zigzag_rows(std::int64_t length, int rank,
                                                                 int ranks);

/// This rank's rows of attention over the sequence sharded across `comm`'s ranks: q (B, H,
/// n_r, Dh), k (B, Hkv, n_r, Dh), v (B, Hkv, n_r, Dv), f32, rank r holding rows [n_0 + ...
/// + n_{r-1}, ... + n_r) (or, with RingOptions::zigzag, its two chunks, zigzag_rows).
/// Shards may differ in length (n_r >= 1); B, H,
/// Hkv, Dh and Dv must agree on every rank, or every rank throws qkv::Error naming the
/// ranks and dims. Returns (B, H, n_r, Dv). Every rank must call it.
Tensor ring_attention(Comm &comm, const Tensor &q, const Tensor &k, const Tensor &v,
                      const RingOptions &options = {}, RingStats *stats = nullptr);

} // namespace qkv::dist
