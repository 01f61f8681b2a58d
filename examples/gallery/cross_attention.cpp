// Cross-attention (the decoder of an encoder-decoder, as in the seed's translation
// example): queries come from the decoder's x (L positions), keys and values from the
// encoder's output, memory (S positions).
#include "variants.hpp"

namespace qkv::gallery {
namespace {

Graph build(const Params &) {
  Graph g("cross_attention");
  auto x = g.input<f32>("x", B, L, D);           // decoder states
  auto memory = g.input<f32>("memory", B, S, D); // encoder output
  auto wq = g.param<f32>("wq", D, H * Dh);
  auto wk = g.param<f32>("wk", D, H * Dh);
  auto wv = g.param<f32>("wv", D, H * Dh);
  auto wo = g.param<f32>("wo", H * Dh, D);
  auto q = split_heads(linear(x, wq), H, Dh);      // (B, H, L, Dh)
  auto k = split_heads(linear(memory, wk), H, Dh); // (B, H, S, Dh)
  auto v = split_heads(linear(memory, wv), H, Dh);
  g.output("y", linear(merge_heads(attention(q, k, v)), wo).value());
  return g;
}

} // namespace

const Variant cross_attention{"cross_attention", "decoder queries (L) over encoder memory (S)",
                              Form::Cross, build};

} // namespace qkv::gallery
