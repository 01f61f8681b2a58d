// The baselines qkv is measured against, on the same inputs:
//
//   reference  unfused plain C++: per (batch, head) the Lq x Lkv scores are materialised,
//              masked (-inf), softmaxed row by row and multiplied by v, in plain loops
//              (f32, optimised and vectorised by the compiler for the host's ISA);
//              projections as plain row-times-matrix loops. Parallel over (batch, head)
//              pairs (projections: over rows) on T threads.
//   openblas   per (batch, head): cblas_sgemm for scale * q k^T, the same C++ mask and
//              softmax (rows in parallel on T threads), cblas_sgemm for p v (cblas_sgemv
//              for both when there is one query: decoding); projections one cblas_sgemm
//              each. OpenBLAS runs on T threads. Built only when OpenBLAS was found (a
//              bench-only dependency).
//
// Neither skips masked scores: they compute every score and then mask, as unfused code
// does. Both give 0 for a query row whose keys are all masked, as qkv does.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "qkv_bench/problem.hpp"

namespace qkv::bench {

/// A (batch, head, row) view of rows of head_dim floats; strides in floats. Covers both
/// (B, H, L, Dh) tensors and the heads inside (B, L, H * Dh) projections.
template <class T> struct HeadsView {
  T *data = nullptr;
  std::int64_t batch_stride = 0, head_stride = 0, row_stride = 0;

  T *row(std::int64_t b, std::int64_t h, std::int64_t i) const {
    return data + b * batch_stride + h * head_stride + i * row_stride;
  }
};

/// The contiguous (B, heads, len, head_dim) layout.
template <class T>
HeadsView<T> heads_major(T *data, std::int64_t heads, std::int64_t len, std::int64_t head_dim) {
  return {data, heads * len * head_dim, len * head_dim, head_dim};
}
/// The heads inside a contiguous (B, len, heads * head_dim) tensor.
template <class T>
HeadsView<T> heads_inside_rows(T *data, std::int64_t heads, std::int64_t len,
                               std::int64_t head_dim) {
  return {data, len * heads * head_dim, head_dim, heads * head_dim};
}

enum class Baseline { Reference, OpenBlas };
std::string_view baseline_name(Baseline b);
/// The baselines this build has: reference, and openblas when OpenBLAS was found.
std::vector<Baseline> available_baselines();
/// Why a baseline is missing from available_baselines(), or "" when none is.
std::string_view missing_baselines_reason();
/// The BLAS library's own description (OpenBLAS's config string), or "".
std::string_view blas_config();

/// y (m, n) = x (m, k) . w (k, n), all contiguous and row-major: cblas_sgemm on T
/// threads, or plain loops parallel over rows.
void matmul(Baseline b, std::int64_t m, std::int64_t k, std::int64_t n, const float *x,
            const float *w, float *y, int threads);
/// out = softmax(mask(scale q k^T)) v for every (batch, head) of `p`.
void attention(Baseline b, const AttentionProblem &p, HeadsView<const float> q,
               HeadsView<const float> k, HeadsView<const float> v, HeadsView<float> out,
               int threads);

/// The tensors of a BlockProblem, contiguous and row-major (see BlockProblem).
struct BlockTensors {
  const float *x = nullptr, *memory = nullptr; ///< memory: cross-attention only
  const float *wq = nullptr, *wk = nullptr, *wv = nullptr, *wo = nullptr; ///< wo: out_proj
  float *out = nullptr;                                                   ///< (B, Lq, D)
};

/// The whole block: projections, attention per head, merged heads, output projection.
void block(Baseline b, const BlockProblem &p, const BlockTensors &t, int threads);

} // namespace qkv::bench
