// Block-diagonal groups: positions attend within their own group of G consecutive
// positions only (independent segments of one length processed as one batch row).
#include "variants.hpp"

namespace qkv::gallery {
namespace {

constexpr std::int64_t group = 64;

Graph build(const Params &) {
  Graph g("block_diagonal");
  auto [q, k, v] = qkv_inputs(g);
  auto o = attention(q, k, v).mask(
      [](auto, auto, auto qi, auto ki) { return qi / group == ki / group; });
  g.output("out", o.value());
  return g;
}

} // namespace

const Variant block_diagonal{"block_diagonal", "groups of 64 positions attend within themselves",
                             Form::Attention, build};

} // namespace qkv::gallery
