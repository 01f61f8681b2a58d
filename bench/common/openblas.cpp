// The OpenBLAS baseline: sgemm, C++ mask + softmax, sgemm. Compiled only when CMake found
// OpenBLAS (QKV_BENCH_HAVE_OPENBLAS); otherwise the baseline reports itself missing.
//
// OpenBLAS is opened (dlopen) when a baseline first needs it, not linked: a linked
// OpenBLAS starts its thread pool when the program loads, and each idle worker spins
// (sched_yield) for about 0.1 s before it sleeps. Every `qkv` command and every program
// on qkv::cli paid that, baseline or not: in `qkv run mha` (a cold compile of ~150 ms on
// a 2-core host) the spinning worker took 60 ms of CPU from the compile's threads, and
// it ran beside the FMA peak that `qkv bench` measures first.
#include <memory>
#include <stdexcept>
#include <string>

#include "kernels.hpp"
#include "qkv_bench/timing.hpp"

#if QKV_BENCH_HAVE_OPENBLAS
#include <cblas.h>
#include <dlfcn.h>
#endif

namespace qkv::bench::detail {

#if QKV_BENCH_HAVE_OPENBLAS

namespace {

/// The OpenBLAS functions the baselines call, from the library CMake found
/// (QKV_OPENBLAS_PATH), opened on first use; a library that cannot be opened, or that
/// lacks one of them, is a std::runtime_error naming it (the baseline then fails, and
/// says why, rather than being left out).
struct OpenBlas {
  decltype(&cblas_sgemm) sgemm = nullptr;
  decltype(&cblas_sgemv) sgemv = nullptr;
  void (*set_num_threads)(int) = nullptr;
  char *(*get_config)() = nullptr;
};

template <class F> void resolve(void *lib, const char *name, F &f) {
  void *sym = dlsym(lib, name);
  if (!sym)
    throw std::runtime_error(std::string("openblas: ") + QKV_OPENBLAS_PATH + " has no " + name);
  f = reinterpret_cast<F>(sym);
}

const OpenBlas &openblas() {
  static const OpenBlas lib = [] {
    void *h = dlopen(QKV_OPENBLAS_PATH, RTLD_NOW | RTLD_LOCAL);
    if (!h)
      throw std::runtime_error(std::string("openblas: cannot open ") + QKV_OPENBLAS_PATH + ": " +
                               dlerror());
    OpenBlas o;
    resolve(h, "cblas_sgemm", o.sgemm);
    resolve(h, "cblas_sgemv", o.sgemv);
    resolve(h, "openblas_set_num_threads", o.set_num_threads);
    resolve(h, "openblas_get_config", o.get_config);
    return o;
  }();
  return lib;
}

} // namespace

bool have_openblas() { return true; }
const char *openblas_config() { return openblas().get_config(); }

void openblas_matmul(std::int64_t m, std::int64_t k, std::int64_t n, const float *a, const float *b,
                     float *c, int threads) {
  const OpenBlas &blas = openblas();
  blas.set_num_threads(threads);
  blas.sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
             static_cast<int>(k), 1.0f, a, static_cast<int>(k), b, static_cast<int>(n), 0.0f, c,
             static_cast<int>(n));
}

void openblas_attention(const AttentionProblem &p, HeadsView<const float> q,
                        HeadsView<const float> k, HeadsView<const float> v, HeadsView<float> out,
                        int threads) {
  const OpenBlas &blas = openblas();
  blas.set_num_threads(threads);
  const int L = static_cast<int>(p.len_q), S = static_cast<int>(p.len_kv);
  const int D = static_cast<int>(p.head_dim);
  const std::int64_t group = p.heads / p.kv_heads;
  std::unique_ptr<float[]> scores(new float[static_cast<std::size_t>(L) * S]);
  float *s = scores.get();
  for (std::int64_t b = 0; b < p.batch; ++b)
    for (std::int64_t h = 0; h < p.heads; ++h) {
      std::int64_t hk = h / group;
      const int qs = static_cast<int>(q.row_stride), ks = static_cast<int>(k.row_stride);
      const int vs = static_cast<int>(v.row_stride), os = static_cast<int>(out.row_stride);
      if (L == 1) // one query (decoding): the matrix-vector products sgemm amounts to
        blas.sgemv(CblasRowMajor, CblasNoTrans, S, D, p.scale(), k.row(b, hk, 0), ks,
                   q.row(b, h, 0), 1, 0.0f, s, 1);
      else
        blas.sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, L, S, D, p.scale(), q.row(b, h, 0), qs,
                   k.row(b, hk, 0), ks, 0.0f, s, S);
      parallel_for(L, threads,
                   [&](std::int64_t i, int) { mask_softmax_row(p, i, s + i * std::int64_t{S}); });
      if (L == 1)
        blas.sgemv(CblasRowMajor, CblasTrans, S, D, 1.0f, v.row(b, hk, 0), vs, s, 1, 0.0f,
                   out.row(b, h, 0), 1);
      else
        blas.sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, L, D, S, 1.0f, s, S, v.row(b, hk, 0),
                   vs, 0.0f, out.row(b, h, 0), os);
    }
}

#else

bool have_openblas() { return false; }
const char *openblas_config() { return ""; }
void openblas_matmul(std::int64_t, std::int64_t, std::int64_t, const float *, const float *,
                     float *, int) {}
void openblas_attention(const AttentionProblem &, HeadsView<const float>, HeadsView<const float>,
                        HeadsView<const float>, HeadsView<float>, int) {}

#endif

} // namespace qkv::bench::detail
