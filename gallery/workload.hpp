// Gallery graphs as benchmark problems: the sizes, flops and bytes of an entry at a
// shape (qkv_bench_common's terms), its inputs, and its baselines run on those inputs.
// Used by `qkv bench` and bench/bench_attention.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <qkv/runtime/tensor.hpp>

#include "entry.hpp"
#include "qkv_bench/baselines.hpp"
#include "qkv_bench/problem.hpp"

namespace qkv::gallery {

bool is_block(const Entry &e);
/// The attention of entry e at shape s. A mask expression (Workload::Mask::Expr) is a
/// Table mask, `table` being its kept pairs (len_q x len_kv, see mask_table).
bench::AttentionProblem attention_problem(const Entry &e, const GraphShape &s,
                                          const std::uint8_t *table = nullptr);
bench::BlockProblem block_problem(const Entry &e, const GraphShape &s,
                                  const std::uint8_t *table = nullptr);
/// Flops and bytes of the whole graph (qkv_bench_common's counting rules), for the
/// entries other than the variants, whose masks are fixed forms. Over a KV cache
/// (Workload::cache) the attention is the dense one of baseline_inputs, S + 1 keys, and
/// the bytes are the rows it reads (not the whole pool) plus lengths and block table.
double flops(const Entry &e, const GraphShape &s);
double bytes(const Entry &e, const GraphShape &s);

/// Flops of graph g on inputs `in`, node by node, by the same rules: 2*M*K*N per
/// matmul, linear and linformer_project; attention 2*(Dh + Dv) per (query, key) pair its
/// mask keeps (over every batch and head), the pairs counted by evaluating the mask on
/// `in` (reference::kept_pairs); linear attention 2*Dh*Dv per key for phi(k)^T v and
/// 2*Dh*(Dv + 1) per query for its numerator and denominator. Softmax, masks, mods, norms
/// and elementwise ops count nothing.
double graph_flops(const Graph &g, const TensorMap &in);
/// Bytes of g's arguments read once and its outputs written once.
double graph_bytes(const Graph &g, const TensorMap &in);

/// Why the baselines cannot compute entry e's graph g, or "" when they can: they compute
/// attention alone with a mask that is the same for every batch and head (at batch 1, a
/// mask that reads b is), and blocks of projections and attention with no mod.
std::string baseline_gap(const Entry &e, const Graph &g, const GraphShape &s);
/// The mask of g's attention at (b=0, h=0) on `in`, as the baselines' Table mask takes it.
std::vector<std::uint8_t> mask_table(const Graph &g, const TensorMap &in);

/// Random inputs in [-1, 1) (fixed seed); weights scaled by 1/sqrt(fan-in), their first
/// extent, as models initialise them, so that block outputs stay O(1).
TensorMap bench_inputs(const Graph &g, const DimBindings &dims);

/// The inputs the baselines read for `in`, the inputs of entry e at shape s: `in`
/// itself, or over a KV cache (Workload::cache) q and the dense k, v (B, Hkv, S + L, Dh),
/// each sequence's S cached rows (gathered through the block table when paged) then its
/// L new ones. Built once, before the baselines are timed.
TensorMap baseline_inputs(const Entry &e, const GraphShape &s, const TensorMap &in);

/// One run of baseline b on baseline_inputs(e, s, ...) of entry e at shape s, into out
/// (the shape of the graph's output).
void run_baseline(bench::Baseline b, const Entry &e, const GraphShape &s, const TensorMap &in,
                  Tensor &out, int threads, const std::uint8_t *table = nullptr);

} // namespace qkv::gallery
