// T5's relative position bias: each head adds a learned scalar for the bucket of the
// distance kv - q, from a captured (H, 32) table. Buckets as T5 makes them (bidirectional,
// 32 buckets, max distance 128): 16 per direction, exact up to 7, then logarithmic.
#include "variants.hpp"

#include <cmath>

namespace qkv::gallery {
namespace {

constexpr auto Buckets = dim<"Buckets", 32>;

/// T5's bucket of rel = kv - q, with integers: (rel > 0 ? 16 : 0) + min(|rel|, 8), plus one
/// for each distance at which T5's logarithmic formula steps up a bucket.
IntExpr t5_bucket(IntExpr rel) {
  const std::int64_t half = 16, exact = 8, max_distance = 128;
  auto n = abs(rel);
  IntExpr bucket = select(rel > 0, half, 0) + min(n, exact);
  std::int64_t reached = exact;
  for (std::int64_t d = exact; d <= max_distance; ++d) {
    double t5 = exact + std::log(double(d) / exact) / std::log(double(max_distance) / exact) *
                            double(half - exact); // T5's formula, truncated below
    auto b = std::min<std::int64_t>(static_cast<std::int64_t>(t5), half - 1);
    for (; reached < b; ++reached)
      bucket = bucket + select(n >= d, 1, 0);
  }
  return bucket;
}

Graph build(const Params &) {
  Graph g("t5_bias");
  auto [q, k, v] = qkv_inputs(g);
  auto table = g.param<f32>("rel_bias", H, Buckets);
  auto o = attention(q, k, v).score_mod(
      [&](auto s, auto b, auto h, auto qi, auto ki) { return s + table(h, t5_bucket(ki - qi)); });
  g.output("out", o.value());
  return g;
}

} // namespace

const Variant t5_bias{"t5_bias", "bidirectional, plus a learned bias per head and T5 bucket",
                      Form::Attention, build};

} // namespace qkv::gallery
