// Longformer: a local window of W/2 positions on each side, plus G global positions (a
// [CLS] token, the question) that see every position and that every position sees.
#include "variants.hpp"

namespace qkv::gallery {
namespace {

constexpr std::int64_t global = 16;

Graph build(const Params &p) {
  Graph g("longformer");
  auto [q, k, v] = qkv_inputs(g);
  auto local =
      mask_fn([w = p.window](auto, auto, auto qi, auto ki) { return abs(qi - ki) <= w / 2; });
  auto global_tokens =
      mask_fn([](auto, auto, auto qi, auto ki) { return qi < global || ki < global; });
  auto o = attention(q, k, v).mask(or_masks(local, global_tokens));
  g.output("out", o.value());
  return g;
}

} // namespace

const Variant longformer{"longformer",
                         "local window of W/2 each side, or one of 16 global positions",
                         Form::Attention,
                         build,
                         nullptr,
                         8,
                         true};

} // namespace qkv::gallery
