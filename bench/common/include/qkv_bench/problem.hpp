// What a benchmark computes, as numbers: the sizes of an attention problem or of a whole
// attention block, how many flops it does and how many bytes it must move. Counted the
// same way by `qkv bench` and bench_attention; docs/compiler.md ("Benchmarks") states
// the rules.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>

namespace qkv::bench {

/// Table: any mask, given as its kept (query, key) pairs (the same for every batch and
/// head), as a mask expression evaluates to.
enum class MaskKind { None, Causal, Window, Table };
std::string_view mask_name(MaskKind m);

/// softmax(mask(scale * q k^T)) v for every batch b and query head h: q (B, H, Lq, Dh),
/// k and v (B, Hkv, Lkv, Dh); query head h reads kv head h / (H / Hkv).
/// Causal keeps kv <= q; Window keeps q - window < kv <= q (positions counted from 0 on
/// both axes, so Lq != Lkv aligns the first query with the first key).
struct AttentionProblem {
  std::int64_t batch = 1, heads = 1, kv_heads = 1, len_q = 1, len_kv = 1, head_dim = 1;
  MaskKind mask = MaskKind::None;
  std::int64_t window = 0; ///< Window: keys a query sees, itself included
  /// Table: table[i * len_kv + j] != 0 keeps key j for query i (len_q x len_kv bytes,
  /// owned by the caller).
  const std::uint8_t *table = nullptr;

  /// 1 / sqrt(head_dim).
  float scale() const;
  /// The keys query row i keeps: [first, second), empty when first >= second (for
  /// Table: the range from its first kept key to past its last).
  std::pair<std::int64_t, std::int64_t> kept(std::int64_t i) const;
  /// Unmasked (query, key) pairs of one (batch, head), counted exactly.
  std::int64_t kept_pairs() const;
  /// 4 * B * H * kept_pairs * Dh: 2 for each multiply-add of q.k and of p.v.
  double flops() const;
  /// Bytes of q, k and v read once and of the output written once (f32).
  double bytes() const;
  /// Throws std::invalid_argument naming the field that is out of range.
  void check() const;
};

/// A multi-head attention block: q = x wq, k = src wk, v = src wv (src = x, or memory for
/// cross-attention), attention per head, heads merged, then y = o wo (when out_proj).
/// x (B, Lq, D) with D = heads * head_dim; memory (B, Lkv, D); wq (D, D), wk and wv
/// (D, Hkv * Dh), wo (D, D).
struct BlockProblem {
  AttentionProblem attention;
  bool cross = false;
  bool out_proj = true;

  std::int64_t model_dim() const { return attention.heads * attention.head_dim; }
  std::int64_t kv_dim() const { return attention.kv_heads * attention.head_dim; }
  /// 2 * M * K * N for each projection.
  double projection_flops() const;
  double flops() const { return projection_flops() + attention.flops(); }
  /// Bytes of x (and memory), the weights, and the output (f32).
  double bytes() const;
};

} // namespace qkv::bench
