// Causal language modelling (GPT): each position sees itself and the positions before it.
#include "variants.hpp"

namespace qkv::gallery {
namespace {

Graph build(const Params &) {
  Graph g("causal_lm");
  auto [q, k, v] = qkv_inputs(g);
  auto o = attention(q, k, v).mask(causal_mask()); // q >= kv
  g.output("out", o.value());
  return g;
}

} // namespace

const Variant causal_lm{"causal_lm", "causal self-attention: q >= kv", Form::Attention, build};

} // namespace qkv::gallery
