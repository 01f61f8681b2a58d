// The causal block of sinusoidal_block with rotary position embeddings instead (RoFormer,
// Llama): queries and keys are rotated by their position, so scores depend on q - kv.
#include "variants.hpp"

namespace qkv::gallery {
namespace {

Graph build(const Params &) {
  Graph g("rope_block");
  auto x = g.input<f32>("x", B, L, D);
  auto wq = g.param<f32>("wq", D, H * Dh);
  auto wk = g.param<f32>("wk", D, H * Dh);
  auto wv = g.param<f32>("wv", D, H * Dh);
  auto wo = g.param<f32>("wo", H * Dh, D);
  auto q = rope(split_heads(linear(x, wq), H, Dh)); // rotated by position
  auto k = rope(split_heads(linear(x, wk), H, Dh));
  auto v = split_heads(linear(x, wv), H, Dh);
  auto o = attention(q, k, v).mask(causal_mask());
  g.output("y", linear(merge_heads(o), wo).value());
  return g;
}

} // namespace

const Variant rope_block{"rope_block", "causal block, RoPE on queries and keys", Form::Block,
                         build};

} // namespace qkv::gallery
