// Prefix LM (T5's prefix-LM objective, UL2): the first P positions, the prompt, see each
// other in full; the positions after them are causal and see the whole prompt.
#include "variants.hpp"

namespace qkv::gallery {
namespace {

constexpr std::int64_t prefix = 64;

Graph build(const Params &) {
  Graph g("prefix_lm");
  auto [q, k, v] = qkv_inputs(g);
  auto in_prefix = mask_fn([](auto, auto, auto, auto ki) { return ki < prefix; });
  auto o = attention(q, k, v).mask(or_masks(causal_mask(), in_prefix));
  g.output("out", o.value());
  return g;
}

} // namespace

const Variant prefix_lm{"prefix_lm", "bidirectional prefix of 64 positions, causal after it",
                        Form::Attention, build};

} // namespace qkv::gallery
