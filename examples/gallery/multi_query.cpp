// Multi-query attention (MQA, Shazeer 2019): every query head shares one key/value head.
#include "variants.hpp"

namespace qkv::gallery {
namespace {

constexpr auto Hkv = dim<"Hkv", 1>;

Graph build(const Params &) {
  Graph g("multi_query");
  auto x = g.input<f32>("x", B, L, D);
  auto wq = g.param<f32>("wq", D, H * Dh);
  auto wk = g.param<f32>("wk", D, Hkv * Dh);
  auto wv = g.param<f32>("wv", D, Hkv * Dh);
  auto wo = g.param<f32>("wo", H * Dh, D);
  auto q = split_heads(linear(x, wq), H, Dh);   // (B, 8, L, Dh)
  auto k = split_heads(linear(x, wk), Hkv, Dh); // (B, 1, L, Dh)
  auto v = split_heads(linear(x, wv), Hkv, Dh);
  g.output("y", linear(merge_heads(attention(q, k, v)), wo).value());
  return g;
}

} // namespace

const Variant multi_query{
    "multi_query", "MQA block: 8 query heads share 1 kv head", Form::Block, build, nullptr, 1};

} // namespace qkv::gallery
