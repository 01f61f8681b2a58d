#include "qkv_bench/baselines.hpp"

#include <memory>
#include <stdexcept>
#include <string>

#include "kernels.hpp"

namespace qkv::bench {

std::string_view baseline_name(Baseline b) {
  return b == Baseline::Reference ? "reference" : "openblas";
}

std::vector<Baseline> available_baselines() {
  std::vector<Baseline> all = {Baseline::Reference};
  if (detail::have_openblas())
    all.push_back(Baseline::OpenBlas);
  return all;
}

std::string_view missing_baselines_reason() {
  return detail::have_openblas()
             ? ""
             : "openblas: not built (OpenBLAS was not found when configuring; install "
               "libopenblas-dev, a bench-only dependency, and reconfigure)";
}

std::string_view blas_config() { return detail::openblas_config(); }

namespace {
void require(Baseline b) {
  if (b == Baseline::OpenBlas && !detail::have_openblas())
    throw std::runtime_error(std::string(missing_baselines_reason()));
}

} // namespace

void matmul(Baseline b, std::int64_t m, std::int64_t k, std::int64_t n, const float *x,
            const float *w, float *y, int threads) {
  require(b);
  if (b == Baseline::OpenBlas)
    detail::openblas_matmul(m, k, n, x, w, y, threads);
  else
    detail::reference_matmul(m, k, n, x, w, y, threads);
}

void attention(Baseline b, const AttentionProblem &p, HeadsView<const float> q,
               HeadsView<const float> k, HeadsView<const float> v, HeadsView<float> out,
               int threads) {
  require(b);
  p.check();
  if (b == Baseline::OpenBlas)
    detail::openblas_attention(p, q, k, v, out, threads);
  else
    detail::reference_attention(p, q, k, v, out, threads);
}

void block(Baseline b, const BlockProblem &p, const BlockTensors &t, int threads) {
  require(b);
  const AttentionProblem &a = p.attention;
  a.check();
  const std::int64_t D = p.model_dim(), Dkv = p.kv_dim();
  const std::int64_t rows_q = a.batch * a.len_q, rows_kv = a.batch * a.len_kv;
  const float *src = p.cross ? t.memory : t.x;
  std::unique_ptr<float[]> q(new float[rows_q * D]), k(new float[rows_kv * Dkv]),
      v(new float[rows_kv * Dkv]), o(p.out_proj ? new float[rows_q * D] : nullptr);
  matmul(b, rows_q, D, D, t.x, t.wq, q.get(), threads);
  matmul(b, rows_kv, D, Dkv, src, t.wk, k.get(), threads);
  matmul(b, rows_kv, D, Dkv, src, t.wv, v.get(), threads);
  float *heads_out = p.out_proj ? o.get() : t.out;
  const float *cq = q.get(), *ck = k.get(), *cv = v.get();
  attention(b, a, heads_inside_rows(cq, a.heads, a.len_q, a.head_dim),
            heads_inside_rows(ck, a.kv_heads, a.len_kv, a.head_dim),
            heads_inside_rows(cv, a.kv_heads, a.len_kv, a.head_dim),
            heads_inside_rows(heads_out, a.heads, a.len_q, a.head_dim), threads);
  if (p.out_proj)
    matmul(b, rows_q, D, D, o.get(), t.wo, t.out, threads);
}

} // namespace qkv::bench
