// Multi-head self-attention with the output projection W^O ("Attention Is All You Need"):
// x is projected to 8 heads of queries, keys and values, each head attends, and the
// merged heads are projected back to the model dim.
#include "variants.hpp"

namespace qkv::gallery {
namespace {

Graph build(const Params &) {
  Graph g("multihead");
  auto x = g.input<f32>("x", B, L, D);
  auto wq = g.param<f32>("wq", D, H * Dh);
  auto wk = g.param<f32>("wk", D, H * Dh);
  auto wv = g.param<f32>("wv", D, H * Dh);
  auto wo = g.param<f32>("wo", H * Dh, D);
  auto q = split_heads(linear(x, wq), H, Dh); // (B, H, L, Dh)
  auto k = split_heads(linear(x, wk), H, Dh);
  auto v = split_heads(linear(x, wv), H, Dh);
  g.output("y", linear(merge_heads(attention(q, k, v)), wo).value()); // (B, L, D)
  return g;
}

} // namespace

const Variant multihead{"multihead", "multi-head self-attention block with W^O (H=8, D=512)",
                        Form::Block, build};

} // namespace qkv::gallery
