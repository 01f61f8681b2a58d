// Prefix LM with a prompt length per sequence (a batch of prompts of different lengths):
// a captured tensor gives each sequence's prefix; the first prefix[b] positions see each
// other in full, the positions after them are causal and see the whole prompt.
#include "variants.hpp"

#include <random>

namespace qkv::gallery {
namespace {

Graph build(const Params &) {
  Graph g("prefix_lm_lengths");
  auto [q, k, v] = qkv_inputs(g);
  auto prefix = g.input<i32>("prefix", B); // prefix[b]: the prompt length of sequence b
  auto in_prefix = mask_fn([&](auto b, auto, auto, auto ki) { return ki < prefix(b); });
  auto o = attention(q, k, v).mask(or_masks(causal_mask(), in_prefix));
  g.output("out", o.value());
  return g;
}

/// Prompts of random lengths, a quarter to three quarters of the row (a fixed
/// pseudo-random sequence).
void prompts(TensorMap &in) {
  Tensor &prefix = in.at("prefix");
  std::int64_t len = in.at("q").shape()[2];
  std::mt19937_64 random(11);
  auto spread = static_cast<std::uint64_t>(len / 2 + 1);
  for (std::int64_t b = 0; b < prefix.shape()[0]; ++b)
    prefix.set(b, static_cast<double>(len / 4 + static_cast<std::int64_t>(random() % spread)));
}

} // namespace

const Variant prefix_lm_lengths{"prefix_lm_lengths",
                                "bidirectional prompt of prefix[b] positions (a captured tensor), "
                                "causal after it",
                                Form::Attention, build, prompts};

} // namespace qkv::gallery
