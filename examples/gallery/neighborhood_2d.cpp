// 2-D neighbourhood attention (NATTEN) on an image 32 pixels wide flattened row by row: a
// pixel sees the 7x7 pixels around it, the window shifted inward at the image's edges so
// that it always holds 49 pixels (when the image has 7 rows).
#include "variants.hpp"

namespace qkv::gallery {
namespace {

constexpr std::int64_t width = 32, kernel = 7;

Graph build(const Params &) {
  Graph g("neighborhood_2d");
  auto [q, k, v] = qkv_inputs(g);
  auto o = attention(q, k, v).mask([](auto, auto, auto qi, auto ki) {
    auto height = len_q() / width; // rows of the image
    auto top = max(0, min(qi / width - kernel / 2, height - kernel));
    auto left = max(0, min(qi % width - kernel / 2, width - kernel));
    auto row = ki / width, col = ki % width;
    return row >= top && row < top + kernel && col >= left && col < left + kernel;
  });
  g.output("out", o.value());
  return g;
}

} // namespace

const Variant neighborhood_2d{"neighborhood_2d",
                              "7x7 neighbourhood on a 32-wide image, clamped at the edges",
                              Form::Attention,
                              build,
                              nullptr,
                              8,
                              false,
                              {256, 96, 300}};

} // namespace qkv::gallery
