#include "qkv_bench/problem.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace qkv::bench {

std::string_view mask_name(MaskKind m) {
  switch (m) {
  case MaskKind::None: return "none";
  case MaskKind::Causal: return "causal";
  case MaskKind::Window: return "window";
  case MaskKind::Table: return "table";
  }
  return "?";
}

float AttentionProblem::scale() const {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
}

std::pair<std::int64_t, std::int64_t> AttentionProblem::kept(std::int64_t i) const {
  switch (mask) {
  case MaskKind::None: return {0, len_kv};
  case MaskKind::Causal: return {0, std::min(i + 1, len_kv)};
  case MaskKind::Window:
    return {std::max<std::int64_t>(0, i - window + 1), std::min(i + 1, len_kv)};
  case MaskKind::Table: {
    const std::uint8_t *row = table + i * len_kv;
    std::int64_t lo = 0, hi = len_kv;
    while (lo < len_kv && !row[lo])
      ++lo;
    while (hi > lo && !row[hi - 1])
      --hi;
    return {lo, hi};
  }
  }
  return {0, 0};
}

std::int64_t AttentionProblem::kept_pairs() const {
  if (mask == MaskKind::None)
    return len_q * len_kv;
  if (mask == MaskKind::Table)
    return std::count_if(table, table + len_q * len_kv, [](std::uint8_t k) { return k != 0; });
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < len_q; ++i) {
    auto [lo, hi] = kept(i);
    n += std::max<std::int64_t>(0, hi - lo);
  }
  return n;
}

double AttentionProblem::flops() const {
  return 4.0 * static_cast<double>(batch) * static_cast<double>(heads) *
         static_cast<double>(kept_pairs()) * static_cast<double>(head_dim);
}

double AttentionProblem::bytes() const {
  double q = static_cast<double>(batch * heads * len_q * head_dim);
  double kv = static_cast<double>(batch * kv_heads * len_kv * head_dim);
  return 4.0 * (q + 2 * kv + q);
}

void AttentionProblem::check() const {
  auto positive = [](std::int64_t v, const char *what) {
    if (v < 1)
      throw std::invalid_argument(std::string(what) + " must be at least 1, got " +
                                  std::to_string(v));
  };
  positive(batch, "batch");
  positive(heads, "heads");
  positive(kv_heads, "kv_heads");
  positive(len_q, "len_q");
  positive(len_kv, "len_kv");
  positive(head_dim, "head_dim");
  if (mask == MaskKind::Window)
    positive(window, "window");
  if (mask == MaskKind::Table && !table)
    throw std::invalid_argument("a Table mask needs its table");
  if (heads % kv_heads != 0)
    throw std::invalid_argument("kv_heads (" + std::to_string(kv_heads) + ") must divide heads (" +
                                std::to_string(heads) + ")");
}

double BlockProblem::projection_flops() const {
  const AttentionProblem &a = attention;
  double rows_q = static_cast<double>(a.batch * a.len_q);
  double rows_kv = static_cast<double>(a.batch * a.len_kv);
  double d = static_cast<double>(model_dim()), dkv = static_cast<double>(kv_dim());
  double f = 2 * rows_q * d * d + 2 * (2 * rows_kv * d * dkv);
  if (out_proj)
    f += 2 * rows_q * d * d;
  return f;
}

double BlockProblem::bytes() const {
  const AttentionProblem &a = attention;
  double d = static_cast<double>(model_dim()), dkv = static_cast<double>(kv_dim());
  double x = static_cast<double>(a.batch * a.len_q) * d;
  double memory = cross ? static_cast<double>(a.batch * a.len_kv) * d : 0;
  double weights = d * d + 2 * d * dkv + (out_proj ? d * d : 0);
  return 4.0 * (x + memory + weights + x);
}

} // namespace qkv::bench
