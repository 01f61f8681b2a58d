// A causal self-attention block that knows positions from sinusoidal embeddings added to
// its input ("Attention Is All You Need"); rope_block is the same block with RoPE.
#include "variants.hpp"

namespace qkv::gallery {
namespace {

Graph build(const Params &) {
  Graph g("sinusoidal_block");
  auto x = g.input<f32>("x", B, L, D);
  auto wq = g.param<f32>("wq", D, H * Dh);
  auto wk = g.param<f32>("wk", D, H * Dh);
  auto wv = g.param<f32>("wv", D, H * Dh);
  auto wo = g.param<f32>("wo", H * Dh, D);
  auto xp = sinusoidal_pe(x); // x + PE(position)
  auto q = split_heads(linear(xp, wq), H, Dh);
  auto k = split_heads(linear(xp, wk), H, Dh);
  auto v = split_heads(linear(xp, wv), H, Dh);
  auto o = attention(q, k, v).mask(causal_mask());
  g.output("y", linear(merge_heads(o), wo).value());
  return g;
}

} // namespace

const Variant sinusoidal_block{"sinusoidal_block", "causal block, sinusoidal PE added to x",
                               Form::Block, build};

} // namespace qkv::gallery
