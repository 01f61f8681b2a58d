// ALiBi (Press et al.): no position embeddings; head h adds slope_h * (kv - q) to its
// scores, a linear penalty on distance, with slopes 2^(-8(h+1)/H); causal.
#include "variants.hpp"

#include <cmath>

namespace qkv::gallery {
namespace {

Graph build(const Params &) {
  Graph g("alibi");
  auto [q, k, v] = qkv_inputs(g);
  std::vector<double> m;
  for (std::int64_t h = 0; h < H.extent; ++h)
    m.push_back(std::exp2(-8.0 * static_cast<double>(h + 1) / static_cast<double>(H.extent)));
  auto slopes = constant<f32>(g, "slopes", m, H);
  auto o = attention(q, k, v)
               .mask(causal_mask())
               .score_mod([&](auto s, auto b, auto h, auto qi, auto ki) {
                 return s + slopes[h] * (ki - qi);
               });
  g.output("out", o.value());
  return g;
}

} // namespace

const Variant alibi{"alibi", "causal, plus a per-head linear penalty on distance", Form::Attention,
                    build};

} // namespace qkv::gallery
