// The list of the gallery's variants, in the order docs/gallery.md shows them.
#include "variants.hpp"

namespace qkv::gallery {

const std::vector<const Variant *> &variants() {
  static const std::vector<const Variant *> all = {
      &causal_lm,       &sliding_window,  &dilated_window,  &prefix_lm,      &prefix_lm_lengths,
      &packed_documents, &padding,        &shared_prefix,   &longformer,     &neighborhood_2d,
      &block_diagonal,  &alibi,           &softcap,         &t5_bias,        &learned_bias,
      &multihead,       &grouped_query,   &multi_query,     &cross_attention, &linformer,
      &linear_attn,     &sinusoidal_block, &rope_block};
  return all;
}

} // namespace qkv::gallery
