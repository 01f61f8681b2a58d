// Grouped-query attention (GQA, Llama 2 70B): 8 query heads share 2 key/value heads, four
// query heads per group, which shrinks the KV cache fourfold.
#include "variants.hpp"

namespace qkv::gallery {
namespace {

constexpr auto Hkv = dim<"Hkv", 2>;

Graph build(const Params &) {
  Graph g("grouped_query");
  auto x = g.input<f32>("x", B, L, D);
  auto wq = g.param<f32>("wq", D, H * Dh);
  auto wk = g.param<f32>("wk", D, Hkv * Dh);
  auto wv = g.param<f32>("wv", D, Hkv * Dh);
  auto wo = g.param<f32>("wo", H * Dh, D);
  auto q = split_heads(linear(x, wq), H, Dh);   // (B, 8, L, Dh)
  auto k = split_heads(linear(x, wk), Hkv, Dh); // (B, 2, L, Dh)
  auto v = split_heads(linear(x, wv), Hkv, Dh);
  g.output("y", linear(merge_heads(attention(q, k, v)), wo).value());
  return g;
}

} // namespace

const Variant grouped_query{
    "grouped_query", "GQA block: 8 query heads share 2 kv heads", Form::Block, build, nullptr, 2};

} // namespace qkv::gallery
