// The baselines' mask + softmax of one score row, in plain loops. This file is compiled
// with -fno-math-errno and -fveclib=libmvec (where the compiler has them), so std::exp
// vectorises through glibc's vector math library like the rest of the loop.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels.hpp"

namespace qkv::bench::detail {

namespace {

constexpr int kLanes = 16; // independent partial results: lets max and sum vectorise
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

QKV_BENCH_CLONES void mask_row(float *row, std::int64_t n, std::int64_t lo, std::int64_t hi) {
  for (std::int64_t j = 0; j < std::min(lo, n); ++j)
    row[j] = kNegInf;
  for (std::int64_t j = std::max<std::int64_t>(hi, 0); j < n; ++j)
    row[j] = kNegInf;
}

QKV_BENCH_CLONES float row_max(const float *row, std::int64_t n) {
  float part[kLanes];
  std::fill(part, part + kLanes, kNegInf);
  std::int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int t = 0; t < kLanes; ++t)
      part[t] = row[j + t] > part[t] ? row[j + t] : part[t];
  float m = kNegInf;
  for (; j < n; ++j)
    m = row[j] > m ? row[j] : m;
  for (float x : part)
    m = x > m ? x : m;
  return m;
}

QKV_BENCH_CLONES float exp_and_sum(float *row, std::int64_t n, float m) {
  // Arguments below -87 (masked -inf among them) give 0: clamping them first keeps every
  // lane in the vector exp's fast range (it falls back to scalar code for a lane past it),
  // and exp(-87) ~ 1.6e-38 is below anything that can change a sum of terms <= 1.
  for (std::int64_t j = 0; j < n; ++j) {
    float x = row[j] - m;
    float e = std::exp(x > -87.0f ? x : -87.0f);
    row[j] = x > -87.0f ? e : 0.0f;
  }
  float part[kLanes] = {};
  std::int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int t = 0; t < kLanes; ++t)
      part[t] += row[j + t];
  float s = 0;
  for (; j < n; ++j)
    s += row[j];
  for (float x : part)
    s += x;
  return s;
}

QKV_BENCH_CLONES void scale_row(float *row, std::int64_t n, float f) {
  for (std::int64_t j = 0; j < n; ++j)
    row[j] *= f;
}

QKV_BENCH_CLONES void mask_row(float *row, std::int64_t n, const std::uint8_t *keep) {
  for (std::int64_t j = 0; j < n; ++j)
    row[j] = keep[j] ? row[j] : kNegInf;
}

} // namespace

void mask_softmax_row(const AttentionProblem &p, std::int64_t i, float *row) {
  std::int64_t n = p.len_kv;
  if (p.mask == MaskKind::Table) {
    mask_row(row, n, p.table + i * n);
  } else if (p.mask != MaskKind::None) {
    auto [lo, hi] = p.kept(i);
    mask_row(row, n, lo, hi);
  }
  float m = row_max(row, n);
  if (m == kNegInf) { // every key masked: the row's output is 0
    std::fill(row, row + n, 0.0f);
    return;
  }
  scale_row(row, n, 1.0f / exp_and_sum(row, n, m));
}

} // namespace qkv::bench::detail
