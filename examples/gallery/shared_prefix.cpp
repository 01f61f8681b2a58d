// Shared prefix: one prompt of P positions and, packed after it, several continuations of
// C positions each (say, n samples of one prompt). A continuation sees the prompt and
// itself, causally, and never another continuation.
#include "variants.hpp"

namespace qkv::gallery {
namespace {

constexpr std::int64_t prompt = 64, continuation = 32;

Graph build(const Params &) {
  Graph g("shared_prefix");
  auto [q, k, v] = qkv_inputs(g);
  auto in_prompt = mask_fn([](auto, auto, auto, auto ki) { return ki < prompt; });
  auto same_continuation = mask_fn([](auto, auto, auto qi, auto ki) {
    return (qi - prompt) / continuation == (ki - prompt) / continuation;
  });
  auto o =
      attention(q, k, v).mask(and_masks(causal_mask(), or_masks(in_prompt, same_continuation)));
  g.output("out", o.value());
  return g;
}

} // namespace

const Variant shared_prefix{"shared_prefix",
                            "prompt of 64 shared by continuations of 32, each causal",
                            Form::Attention, build};

} // namespace qkv::gallery
