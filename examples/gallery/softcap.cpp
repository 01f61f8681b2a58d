// Logit soft-capping (Gemma 2): every score passes through cap * tanh(s / cap) before
// the softmax, so no logit exceeds the cap; causal.
#include "variants.hpp"

namespace qkv::gallery {
namespace {

constexpr double cap = 50.0;

Graph build(const Params &) {
  Graph g("softcap");
  auto [q, k, v] = qkv_inputs(g);
  auto o =
      attention(q, k, v)
          .mask(causal_mask())
          .score_mod([](auto s, auto b, auto h, auto qi, auto ki) { return cap * tanh(s / cap); });
  g.output("out", o.value());
  return g;
}

} // namespace

const Variant softcap{"softcap", "causal, scores soft-capped at 50 by tanh", Form::Attention,
                      build};

} // namespace qkv::gallery
