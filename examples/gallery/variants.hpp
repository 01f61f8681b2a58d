// The variant gallery: well-known attention variants, each written in a few lines of the
// typed DSL in examples/gallery/NAME.cpp. This header holds what they share: the dims, the
// inputs of each form of graph, and the Variant record that the `qkv` tool's gallery
// (gallery/gallery.cpp), its tests and docs/gallery.md take each variant from, so every
// variant is written once.
//
// The static sizes are in the types, as the typed DSL has them: 8 heads of 64 (model dim
// 512), the benchmark shape of the blocks; batch and lengths are bound at run time, so one
// graph serves the tests' small shapes and the benchmarks' L = 2048.
#pragma once

#include <array>
#include <cstdint>
#include <tuple>
#include <vector>

#include <qkv/dsl.hpp>
#include <qkv/runtime/tensor.hpp>

namespace qkv::gallery {

constexpr auto B = dim<"B">;    // batch
constexpr auto L = dim<"L">;    // query positions
constexpr auto S = dim<"S">;    // key/value positions of cross-attention (memory)
constexpr auto H = dim<"H", 8>; // heads
constexpr auto Dh = dim<"Dh", 64>;
constexpr auto D = dim<"D", 512>; // model dim of the blocks, H * Dh

/// q, k, v (B, H, L, Dh): the inputs of the variants that are attention alone
/// (self-attention: keys are positions of the queries' own sequence).
inline auto qkv_inputs(Graph &g) {
  return std::tuple{g.input<f32>("q", B, H, L, Dh), g.input<f32>("k", B, H, L, Dh),
                    g.input<f32>("v", B, H, L, Dh)};
}

/// What the variant's graph is; it fixes the inputs and output, the dynamic dims and
/// the shapes the variant is tested and benchmarked at.
enum class Form {
  Attention, ///< attention alone: q, k, v (B, H, L, Dh) -> "out" (B, H, L, Dh)
  Block,     ///< x (B, L, D) -> "y" (B, L, D): projections, attention per head, wo
  Cross,     ///< x (B, L, D) attends to memory (B, S, D) -> "y" (B, L, D)
};

/// The run-time settings a variant's graph is built with (static in the graph).
struct Params {
  std::int64_t window = 256; ///< keys a sliding window sees (window variants)
};

struct Variant {
  const char *name;
  const char *summary; ///< one line: what it computes
  Form form;
  Graph (*build)(const Params &);
  /// Gives the captured tensors the variant reads meaningful values after random inputs
  /// (document ids that form documents); null when random values are fine.
  void (*inputs)(TensorMap &) = nullptr;
  std::int64_t kv_heads = 8; ///< heads of k and v (GQA, MQA when fewer than H)
  bool uses_window = false;  ///< Params::window matters
  /// Query lengths the tests run at, when the default ones would not reach the mask's
  /// structure (a 2-D neighbourhood needs rows of the image): the default shape's (batch
  /// 1), then one at batch 2, then one more (0: none).
  std::array<std::int64_t, 3> test_lengths = {};
};

/// Every variant, in the order of docs/gallery.md.
const std::vector<const Variant *> &variants();

// ---- the variants (one file each) ----------------------------------------------------------

// Masks.
extern const Variant causal_lm, sliding_window, dilated_window, prefix_lm, prefix_lm_lengths,
    packed_documents, padding, shared_prefix, longformer, neighborhood_2d, block_diagonal;
// Score mods.
extern const Variant alibi, softcap, t5_bias, learned_bias;
// Structure.
extern const Variant multihead, grouped_query, multi_query, cross_attention, linformer, linear_attn,
    sinusoidal_block, rope_block;

} // namespace qkv::gallery
