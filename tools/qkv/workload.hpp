// Gallery graphs as benchmark problems: the sizes, flops and bytes of an entry at a
// shape (qkv_bench_common's terms), its inputs, and its baselines run on those inputs.
// Used by `qkv bench` and bench/bench_attention.
#pragma once

#include <qkv/runtime/tensor.hpp>

#include "gallery.hpp"
#include "qkv_bench/baselines.hpp"
#include "qkv_bench/problem.hpp"

namespace qkv::gallery {

bool is_block(const Entry &e);
bench::AttentionProblem attention_problem(const Entry &e, const GraphShape &s);
bench::BlockProblem block_problem(const Entry &e, const GraphShape &s);
/// Flops and bytes of the whole graph (qkv_bench_common's counting rules).
double flops(const Entry &e, const GraphShape &s);
double bytes(const Entry &e, const GraphShape &s);

/// Random inputs in [-1, 1) (fixed seed); weights scaled by 1/sqrt(fan-in), their first
/// extent, as models initialise them, so that block outputs stay O(1).
TensorMap bench_inputs(const Graph &g, const DimBindings &dims);

/// One run of baseline b on the inputs of entry e at shape s, into out (the shape of the
/// graph's output).
void run_baseline(bench::Baseline b, const Entry &e, const GraphShape &s, const TensorMap &in,
                  Tensor &out, int threads);

} // namespace qkv::gallery
