#include "workload.hpp"

#include <cmath>

#include <qkv/runtime/kernel.hpp>

namespace qkv::gallery {

bool is_block(const Entry &e) { return e.workload.form == Workload::Form::Block; }

bench::AttentionProblem attention_problem(const Entry &e, const GraphShape &s) {
  bench::AttentionProblem p{s.batch, s.heads, s.kv_heads, s.seq, s.kv_len, s.head_dim};
  p.mask = e.workload.mask == Workload::Mask::Causal   ? bench::MaskKind::Causal
           : e.workload.mask == Workload::Mask::Window ? bench::MaskKind::Window
                                                       : bench::MaskKind::None;
  p.window = s.window;
  return p;
}

bench::BlockProblem block_problem(const Entry &e, const GraphShape &s) {
  return {attention_problem(e, s), e.workload.cross, e.workload.out_proj};
}

double flops(const Entry &e, const GraphShape &s) {
  return is_block(e) ? block_problem(e, s).flops() : attention_problem(e, s).flops();
}

double bytes(const Entry &e, const GraphShape &s) {
  return is_block(e) ? block_problem(e, s).bytes() : attention_problem(e, s).bytes();
}

TensorMap bench_inputs(const Graph &g, const DimBindings &dims) {
  TensorMap in = random_inputs(g, dims, 1);
  for (NodeId id : g.arguments()) {
    const Node &n = g.node(id);
    if (n.op != OpKind::Param)
      continue;
    Tensor &t = in.at(n.name);
    float f = static_cast<float>(1.0 / std::sqrt(static_cast<double>(t.shape().front())));
    float *p = t.data_as<float>();
    for (std::int64_t i = 0; i < t.numel(); ++i)
      p[i] *= f;
  }
  return in;
}

void run_baseline(bench::Baseline b, const Entry &e, const GraphShape &s, const TensorMap &in,
                  Tensor &out, int threads) {
  auto ptr = [&](const char *name) { return in.at(name).data_as<float>(); };
  if (is_block(e)) {
    bench::BlockTensors t;
    t.x = ptr("x");
    t.memory = e.workload.cross ? ptr("memory") : nullptr;
    t.wq = ptr("wq");
    t.wk = ptr("wk");
    t.wv = ptr("wv");
    t.wo = e.workload.out_proj ? ptr("wo") : nullptr;
    t.out = out.data_as<float>();
    bench::block(b, block_problem(e, s), t, threads);
    return;
  }
  auto view = [&](const char *name, std::int64_t heads, std::int64_t len) {
    return bench::heads_major(ptr(name), heads, len, s.head_dim);
  };
  bench::attention(b, attention_problem(e, s), view("q", s.heads, s.seq),
                   view("k", s.kv_heads, s.kv_len), view("v", s.kv_heads, s.kv_len),
                   bench::heads_major(out.data_as<float>(), s.heads, s.seq, s.head_dim), threads);
}

} // namespace qkv::gallery
