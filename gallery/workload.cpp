#include "workload.hpp"

#include <algorithm>
#include <cmath>

#include <qkv/runtime/interpreter.hpp>
#include <qkv/runtime/kernel.hpp>

namespace qkv::gallery {

bool is_block(const Entry &e) { return e.workload.form == Workload::Form::Block; }

bench::AttentionProblem attention_problem(const Entry &e, const GraphShape &s,
                                          const std::uint8_t *table) {
  // Over a KV cache: the S cached rows, then this step's L new ones.
  std::int64_t len_kv = e.workload.cache ? s.kv_len + s.seq : s.kv_len;
  bench::AttentionProblem p{s.batch, s.heads, s.kv_heads, s.seq, len_kv, s.head_dim};
  switch (e.workload.mask) {
  case Workload::Mask::None: p.mask = bench::MaskKind::None; break;
  case Workload::Mask::Causal: p.mask = bench::MaskKind::Causal; break;
  case Workload::Mask::Window: p.mask = bench::MaskKind::Window; break;
  case Workload::Mask::Expr: p.mask = bench::MaskKind::Table; break;
  }
  p.window = s.window;
  p.table = table;
  return p;
}

bench::BlockProblem block_problem(const Entry &e, const GraphShape &s, const std::uint8_t *table) {
  return {attention_problem(e, s, table), e.workload.cross, e.workload.out_proj};
}

double flops(const Entry &e, const GraphShape &s) {
  return is_block(e) ? block_problem(e, s).flops() : attention_problem(e, s).flops();
}

double bytes(const Entry &e, const GraphShape &s) {
  // The problems count f32 elements; the graph's float tensors are s.dtype.
  double scale = static_cast<double>(dtype_size(s.dtype)) / 4.0;
  if (is_block(e))
    return scale * block_problem(e, s).bytes();
  double b = scale * attention_problem(e, s).bytes();
  if (e.workload.cache) // lengths (i64), and the block table (i32) of a paged cache
    b += 8.0 * static_cast<double>(s.batch) +
         (s.paged ? 4.0 * static_cast<double>(s.batch * s.pages_per_seq()) : 0.0);
  return b;
}

TensorMap bench_inputs(const Graph &g, const DimBindings &dims) {
  // No prepare: the entries bench_attention runs have no captured inputs.
  return random_weighted_inputs(g, dims, 1, true);
}

TensorMap baseline_inputs(const Entry &e, const GraphShape &s, const TensorMap &in) {
  if (!e.workload.cache)
    return in;
  const std::int64_t B = s.batch, Hkv = s.kv_heads, Dh = s.head_dim, L = s.seq, S = s.kv_len;
  const Tensor &lengths = in.at("lengths");
  for (std::int64_t b = 0; b < B; ++b)
    if (static_cast<std::int64_t>(lengths.get(b)) != S)
      internal_error("baseline_inputs: lengths[" + std::to_string(b) + "] is not " +
                     std::to_string(S));
  const Tensor *table = s.paged ? &in.at("block_table") : nullptr;
  // Where row j < S of sequence b, head h, is in the cache's storage (rows of Dh floats).
  auto cached_row = [&](const Tensor &store, std::int64_t b, std::int64_t h, std::int64_t j) {
    if (!table)
      return (b * Hkv + h) * store.shape()[2] + j;
    const std::int64_t page = GraphShape::kPageRows;
    auto p = static_cast<std::int64_t>(table->get(b * table->shape()[1] + j / page));
    return (p * Hkv + h) * page + j % page;
  };
  auto dense = [&](const char *cached, const char *fresh) {
    const Tensor &store = in.at(cached);
    const float *st = store.data_as<float>(), *fr = in.at(fresh).data_as<float>();
    Tensor out(DType::F32, {B, Hkv, S + L, Dh});
    float *o = out.data_as<float>();
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t h = 0; h < Hkv; ++h)
        for (std::int64_t j = 0; j < S + L; ++j) {
          const float *row = j < S ? st + cached_row(store, b, h, j) * Dh
                                   : fr + ((b * Hkv + h) * L + (j - S)) * Dh;
          std::copy(row, row + Dh, o + ((b * Hkv + h) * (S + L) + j) * Dh);
        }
    return out;
  };
  TensorMap out;
  out["q"] = in.at("q");
  out["k"] = dense(s.paged ? "k_pool" : "k_past", "k_new");
  out["v"] = dense(s.paged ? "v_pool" : "v_past", "v_new");
  return out;
}

namespace {

double numel(const Shape &s) {
  double n = 1;
  for (std::int64_t x : s)
    n *= static_cast<double>(x);
  return n;
}

double attention_flops(const Graph &g, const Node &n, const TensorMap &in, const DimBindings &d) {
  Shape q = resolve(g.node(n.inputs[0]).dims, d), v = resolve(g.node(n.inputs[2]).dims, d);
  double pairs = static_cast<double>(reference::kept_pairs(g, in, n.id));
  return 2 * static_cast<double>(q.back() + v.back()) * pairs;
}

double linear_attention_flops(const Graph &g, const Node &n, const DimBindings &d) {
  Shape q = resolve(g.node(n.inputs[0]).dims, d), k = resolve(g.node(n.inputs[1]).dims, d);
  Shape v = resolve(g.node(n.inputs[2]).dims, d);
  double dh = static_cast<double>(q.back()), dv = static_cast<double>(v.back());
  double keys = numel(k) / dh, queries = numel(q) / dh;
  return 2 * keys * dh * dv + 2 * queries * dh * (dv + 1);
}

/// Whether expression e reads position `which` (b or h), through loads too.
bool reads(const ExprPtr &e, ExprOp which) {
  return e && (e->op == which || std::any_of(e->args.begin(), e->args.end(),
                                             [&](const ExprPtr &a) { return reads(a, which); }));
}

const Node *first_attention(const Graph &g) {
  for (const Node &n : g.nodes())
    if (n.op == OpKind::Attention)
      return &n;
  return nullptr;
}

} // namespace

double graph_flops(const Graph &g, const TensorMap &in) {
  DimBindings d = complete_dims(g, bind_dims(g, signature(in)));
  double f = 0;
  for (const Node &n : g.nodes()) {
    auto operand = [&](int i) { return resolve(g.node(n.inputs[i]).dims, d); };
    switch (n.op) {
    case OpKind::MatMul:
    case OpKind::Linear: f += 2 * numel(resolve(n.dims, d)) * operand(0).back(); break;
    case OpKind::LinformerProject: f += 2 * numel(resolve(n.dims, d)) * operand(0).end()[-2]; break;
    case OpKind::Attention: f += attention_flops(g, n, in, d); break;
    case OpKind::LinearAttention: f += linear_attention_flops(g, n, d); break;
    default: break;
    }
  }
  return f;
}

double graph_bytes(const Graph &g, const TensorMap &in) {
  DimBindings d = complete_dims(g, bind_dims(g, signature(in)));
  double b = 0;
  for (NodeId id : g.arguments())
    b += static_cast<double>(in.at(g.node(id).name).nbytes());
  for (const auto &[name, id] : g.outputs())
    b += numel(resolve(g.node(id).dims, d)) * static_cast<double>(dtype_size(g.node(id).dtype));
  return b;
}

std::string baseline_gap(const Entry &e, const Graph &g, const GraphShape &s) {
  if (s.dtype != DType::F32)
    return "they compute in f32 from f32 tensors; this graph is " +
           std::string(dtype_name(s.dtype));
  if (!e.fixed())
    return "";
  if (!e.baseline_gap.empty())
    return e.baseline_gap;
  const Node *att = first_attention(g);
  if (!att)
    return "they compute softmax attention; '" + e.name + "' has none";
  if (att->attrs.score)
    return "they compute no score_mod; '" + e.name + "' has one";
  if (reads(att->attrs.mask, ExprOp::IndexH) ||
      (s.batch > 1 && reads(att->attrs.mask, ExprOp::IndexB)))
    return "their mask is the same for every batch and head; the mask of '" + e.name + "' is not";
  if (!is_block(e))
    return "";
  for (const Node &n : g.nodes())
    if (n.op != OpKind::Input && n.op != OpKind::Param && n.op != OpKind::Linear &&
        n.op != OpKind::SplitHeads && n.op != OpKind::MergeHeads && n.op != OpKind::Attention)
      return std::string("their blocks are projections and attention; '") + e.name + "' has " +
             std::string(op_name(n.op));
  return "";
}

std::vector<std::uint8_t> mask_table(const Graph &g, const TensorMap &in) {
  const Node *att = first_attention(g);
  if (!att)
    internal_error("mask_table: graph '" + g.name() + "' has no attention");
  return reference::mask_map(g, in, att->id, 0, 0).keep;
}

void run_baseline(bench::Baseline b, const Entry &e, const GraphShape &s, const TensorMap &in,
                  Tensor &out, int threads, const std::uint8_t *table) {
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
    bench::block(b, block_problem(e, s, table), t, threads);
    return;
  }
  bench::AttentionProblem p = attention_problem(e, s, table);
  auto view = [&](const char *name, std::int64_t heads, std::int64_t len) {
    return bench::heads_major(ptr(name), heads, len, s.head_dim);
  };
  bench::attention(b, p, view("q", p.heads, p.len_q), view("k", p.kv_heads, p.len_kv),
                   view("v", p.kv_heads, p.len_kv),
                   bench::heads_major(out.data_as<float>(), p.heads, p.len_q, p.head_dim), threads);
}

} // namespace qkv::gallery
