// A learned additive bias for every (query, key) pair, read from a captured (L, L)
// tensor: an arbitrary attention prior on bidirectional attention.
#include "variants.hpp"

namespace qkv::gallery {
namespace {

Graph build(const Params &) {
  Graph g("learned_bias");
  auto [q, k, v] = qkv_inputs(g);
  auto bias = g.param<f32>("bias", L, L);
  auto o = attention(q, k, v).score_mod(
      [&](auto s, auto b, auto h, auto qi, auto ki) { return s + bias(qi, ki); });
  g.output("out", o.value());
  return g;
}

} // namespace

const Variant learned_bias{"learned_bias", "bidirectional, plus a learned (L, L) bias",
                           Form::Attention, build};

} // namespace qkv::gallery
