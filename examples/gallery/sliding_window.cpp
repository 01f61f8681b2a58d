// Sliding window (Mistral, Gemma 2's local layers): causal attention over the last W
// positions only, the query's own included.
#include "variants.hpp"

namespace qkv::gallery {
namespace {

Graph build(const Params &p) {
  Graph g("sliding_window");
  auto [q, k, v] = qkv_inputs(g);
  auto o = attention(q, k, v).mask(sliding_window_mask(p.window)); // q >= kv && q - kv < W
  g.output("out", o.value());
  return g;
}

} // namespace

const Variant sliding_window{"sliding_window",
                             "causal sliding window of W keys: q >= kv && q - kv < W",
                             Form::Attention,
                             build,
                             nullptr,
                             8,
                             true};

} // namespace qkv::gallery
