// The baselines' loops (internal to qkv_bench_common).
#pragma once

#include <cstdint>

#include "qkv_bench/baselines.hpp"

// Hot loops are compiled for AVX-512, AVX2 and baseline x86-64 and picked at load time,
// so the library needs no -march flag and still uses the host's vectors.
#if defined(__x86_64__) && defined(__clang__)
#define QKV_BENCH_CLONES                                                                           \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define QKV_BENCH_CLONES
#endif

namespace qkv::bench::detail {

/// Row i of p's scores: -inf outside the keys it keeps, then softmax in place; a row
/// with nothing kept becomes all 0.
void mask_softmax_row(const AttentionProblem &p, std::int64_t i, float *row);

/// C (m, n) = A (m, k) B (k, n), all contiguous row-major.
void reference_matmul(std::int64_t m, std::int64_t k, std::int64_t n, const float *a,
                      const float *b, float *c, int threads);
void reference_attention(const AttentionProblem &p, HeadsView<const float> q,
                         HeadsView<const float> k, HeadsView<const float> v, HeadsView<float> out,
                         int threads);

bool have_openblas();
const char *openblas_config();
void openblas_matmul(std::int64_t m, std::int64_t k, std::int64_t n, const float *a, const float *b,
                     float *c, int threads);
void openblas_attention(const AttentionProblem &p, HeadsView<const float> q,
                        HeadsView<const float> k, HeadsView<const float> v, HeadsView<float> out,
                        int threads);

} // namespace qkv::bench::detail
