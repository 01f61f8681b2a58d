// Linformer (Wang et al.): keys and values are projected along the sequence, L -> K' = 256
// rows, by learned E and F, so each head attends to 256 mixtures of positions: O(L K').
#include "variants.hpp"

namespace qkv::gallery {
namespace {

constexpr auto Kp = dim<"Kp", 256>;

Graph build(const Params &) {
  Graph g("linformer");
  auto x = g.input<f32>("x", B, L, D);
  auto wq = g.param<f32>("wq", D, H * Dh);
  auto wk = g.param<f32>("wk", D, H * Dh);
  auto wv = g.param<f32>("wv", D, H * Dh);
  auto wo = g.param<f32>("wo", H * Dh, D);
  auto e = g.param<f32>("e", Kp, L); // projects the keys' positions
  auto f = g.param<f32>("f", Kp, L); // and the values'
  auto q = split_heads(linear(x, wq), H, Dh);
  auto k = linformer_project(split_heads(linear(x, wk), H, Dh), e); // (B, H, Kp, Dh)
  auto v = linformer_project(split_heads(linear(x, wv), H, Dh), f);
  g.output("y", linear(merge_heads(attention(q, k, v)), wo).value());
  return g;
}

} // namespace

const Variant linformer{"linformer", "keys and values projected along the sequence to 256",
                        Form::Block, build};

} // namespace qkv::gallery
