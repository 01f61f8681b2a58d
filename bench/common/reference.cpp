// The unfused plain-C++ reference: scores materialised, masked, softmaxed, times v.
#include <algorithm>
#include <memory>
#include <vector>

#include "kernels.hpp"
#include "qkv_bench/timing.hpp"

namespace qkv::bench::detail {

namespace {

/// c_row (n) = a_row (k) B (k, n): a sum of scaled rows of B (vectorises without
/// reordering any sum).
QKV_BENCH_CLONES void row_times_matrix(const float *__restrict a, const float *__restrict b,
                                       float *__restrict c, std::int64_t k, std::int64_t n) {
  std::fill(c, c + n, 0.0f);
  for (std::int64_t kk = 0; kk < k; ++kk) {
    float s = a[kk];
    const float *brow = b + kk * n;
    for (std::int64_t j = 0; j < n; ++j)
      c[j] += s * brow[j];
  }
}

/// scores (Lq, Lkv) = scale q k^T. With several queries, k is transposed once so that
/// each query's row of scores is a sum of scaled rows of k^T; with few, plain dot
/// products (the transpose would cost more than it saves).
QKV_BENCH_CLONES void scores_of_head(const AttentionProblem &p, const float *q, std::int64_t qs,
                                     const float *k, std::int64_t ks, float *__restrict scores,
                                     float *__restrict kt) {
  const std::int64_t L = p.len_q, S = p.len_kv, D = p.head_dim;
  const float scale = p.scale();
  if (L < 8) {
    for (std::int64_t i = 0; i < L; ++i)
      for (std::int64_t j = 0; j < S; ++j) {
        float part[16] = {};
        std::int64_t d = 0;
        for (; d + 16 <= D; d += 16)
          for (int t = 0; t < 16; ++t)
            part[t] += q[i * qs + d + t] * k[j * ks + d + t];
        float s = 0;
        for (; d < D; ++d)
          s += q[i * qs + d] * k[j * ks + d];
        for (float x : part)
          s += x;
        scores[i * S + j] = scale * s;
      }
    return;
  }
  for (std::int64_t j = 0; j < S; ++j)
    for (std::int64_t d = 0; d < D; ++d)
      kt[d * S + j] = k[j * ks + d];
  for (std::int64_t i = 0; i < L; ++i) {
    float *row = scores + i * S;
    std::fill(row, row + S, 0.0f);
    for (std::int64_t d = 0; d < D; ++d) {
      float a = scale * q[i * qs + d];
      const float *ktrow = kt + d * S;
      for (std::int64_t j = 0; j < S; ++j)
        row[j] += a * ktrow[j];
    }
  }
}

/// out (Lq, Dh) = p (Lq, Lkv) v (Lkv, Dh).
QKV_BENCH_CLONES void probs_times_v(const AttentionProblem &p, const float *probs, const float *v,
                                    std::int64_t vs, float *out, std::int64_t os) {
  const std::int64_t L = p.len_q, S = p.len_kv, D = p.head_dim;
  for (std::int64_t i = 0; i < L; ++i) {
    float *__restrict o = out + i * os;
    std::fill(o, o + D, 0.0f);
    for (std::int64_t j = 0; j < S; ++j) {
      float pj = probs[i * S + j];
      const float *__restrict vrow = v + j * vs;
      for (std::int64_t e = 0; e < D; ++e)
        o[e] += pj * vrow[e];
    }
  }
}

} // namespace

void reference_matmul(std::int64_t m, std::int64_t k, std::int64_t n, const float *a,
                      const float *b, float *c, int threads) {
  parallel_for(m, threads,
               [&](std::int64_t i, int) { row_times_matrix(a + i * k, b, c + i * n, k, n); });
}

void reference_attention(const AttentionProblem &p, HeadsView<const float> q,
                         HeadsView<const float> k, HeadsView<const float> v, HeadsView<float> out,
                         int threads) {
  const std::int64_t L = p.len_q, S = p.len_kv, group = p.heads / p.kv_heads;
  int t = static_cast<int>(std::min<std::int64_t>(std::max(threads, 1), p.batch * p.heads));
  // Per-thread scratch: the scores of one head and k transposed.
  std::vector<std::unique_ptr<float[]>> scores(t), kt(t);
  for (int i = 0; i < t; ++i) {
    scores[i].reset(new float[L * S]);
    kt[i].reset(new float[L < 8 ? 1 : S * p.head_dim]);
  }
  parallel_for(p.batch * p.heads, t, [&](std::int64_t bh, int thread) {
    std::int64_t b = bh / p.heads, h = bh % p.heads, hk = h / group;
    float *s = scores[thread].get();
    scores_of_head(p, q.row(b, h, 0), q.row_stride, k.row(b, hk, 0), k.row_stride, s,
                   kt[thread].get());
    for (std::int64_t i = 0; i < L; ++i)
      mask_softmax_row(p, i, s + i * S);
    probs_times_v(p, s, v.row(b, hk, 0), v.row_stride, out.row(b, h, 0), out.row_stride);
  });
}

} // namespace qkv::bench::detail
