// Linear attention (Katharopoulos et al.): softmax(q k^T) v becomes
// phi(q) (phi(k)^T v) / (phi(q) . sum phi(k)) with phi = elu + 1, which costs O(L Dh^2)
// instead of O(L^2 Dh). Not causal.
#include "variants.hpp"

namespace qkv::gallery {
namespace {

Graph build(const Params &) {
  Graph g("linear_attn");
  auto x = g.input<f32>("x", B, L, D);
  auto wq = g.param<f32>("wq", D, H * Dh);
  auto wk = g.param<f32>("wk", D, H * Dh);
  auto wv = g.param<f32>("wv", D, H * Dh);
  auto wo = g.param<f32>("wo", H * Dh, D);
  auto q = split_heads(linear(x, wq), H, Dh);
  auto k = split_heads(linear(x, wk), H, Dh);
  auto v = split_heads(linear(x, wv), H, Dh);
  auto o = linear_attention(q, k, v, FeatureMap::EluPlusOne);
  g.output("y", linear(merge_heads(o), wo).value());
  return g;
}

} // namespace

const Variant linear_attn{"linear_attn", "linear attention block, phi = elu + 1: O(L Dh^2)",
                          Form::Block, build};

} // namespace qkv::gallery
