// Key padding (a batch of sequences of different lengths padded to one length, as BERT
// encoders run them): a captured tensor gives each sequence's length, and every position
// sees the real keys of its sequence, none of the padding.
#include "variants.hpp"

#include <algorithm>
#include <random>

namespace qkv::gallery {
namespace {

Graph build(const Params &) {
  Graph g("padding");
  auto [q, k, v] = qkv_inputs(g);
  auto lengths = g.input<i32>("lengths", B); // lengths[b]: the real positions of sequence b
  auto o = attention(q, k, v).mask([&](auto b, auto, auto, auto ki) { return ki < lengths(b); });
  g.output("out", o.value());
  return g;
}

/// Lengths of a quarter of the row to the whole row, at least 1 (a fixed pseudo-random
/// sequence).
void lengths(TensorMap &in) {
  Tensor &len = in.at("lengths");
  auto row = static_cast<std::uint64_t>(in.at("q").shape()[2]);
  std::mt19937_64 random(13);
  for (std::int64_t b = 0; b < len.shape()[0]; ++b)
    len.set(b, static_cast<double>(
                   std::max<std::uint64_t>(1, row / 4 + random() % (row - row / 4 + 1))));
}

} // namespace

const Variant padding{"padding",
                      "each sequence sees its first lengths[b] keys (a captured tensor), "
                      "bidirectional",
                      Form::Attention, build, lengths};

} // namespace qkv::gallery
