// Dilated sliding window (Longformer's dilated heads): the W keys of the window are every
// second position, so it reaches 2W positions back for the cost of W.
#include "variants.hpp"

namespace qkv::gallery {
namespace {

constexpr std::int64_t dilation = 2;

Graph build(const Params &p) {
  Graph g("dilated_window");
  auto [q, k, v] = qkv_inputs(g);
  auto dilated = mask_fn([w = p.window](auto, auto, auto qi, auto ki) {
    return qi - ki < w * dilation && (qi - ki) % dilation == 0;
  });
  auto o = attention(q, k, v).mask(and_masks(causal_mask(), dilated));
  g.output("out", o.value());
  return g;
}

} // namespace

const Variant dilated_window{"dilated_window",
                             "causal window of W keys, every 2nd position back to 2W",
                             Form::Attention,
                             build,
                             nullptr,
                             8,
                             true};

} // namespace qkv::gallery
