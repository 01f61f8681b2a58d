// The reference interpreter: runs any Graph in double precision with plain loops. It
// defines what every op means; every compiled path is tested against it.
//
// Semantics worth stating: softmax subtracts the row maximum; a row whose entries are all
// -inf (fully masked) gives 0, never NaN; masks and mods are applied exactly as their
// expression trees say (score_mod first, then the mask, then softmax), at every position
// and with every operand evaluated (&&, || and select do not short-circuit, as in a
// vectorised kernel); a mod that loads out of bounds or divides an integer by zero is a
// qkv::Error naming the op, the mod, the tensor and the position (b, h, q, kv), not
// undefined behaviour. An op computes in double precision whatever its dtype; an f16 or
// bf16 node's result is then rounded to that dtype (to nearest, ties to even), as a GPU
// kernel stores it, and that is what the ops reading it see (f32 and f64 results are not
// rounded). Each eval_<op> in runtime/lib/interpreter.cpp states its op's semantics in
// full.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <qkv/dsl/graph.hpp>
#include <qkv/runtime/tensor.hpp>

namespace qkv::reference {

/// Runs g on `inputs` (inputs and params by name, any dtype the graph declares). Verifies
/// the graph, binds run-time dims from the tensors (qkv::bind_dims) and reports mismatches
/// as qkv::Error. Outputs are f64, keyed by the graph's output names. Only the nodes the
/// outputs depend on are computed, as in a compiled kernel.
TensorMap run(const Graph &g, const TensorMap &inputs);

/// Like run(), but computes and returns every node's value as f64 (index = NodeId, inputs
/// included), for step-by-step walkthroughs and debugging.
std::vector<Tensor> run_all(const Graph &g, const TensorMap &inputs);

/// The largest |score| of attention node `node` over the pairs its mask keeps, every batch
/// and head: scale * q.k after the score_mod, what the softmax's exp sees. `values` are
/// run_all(g, inputs)'s (q, k and the captured tensors are read from them).
double max_abs_score(const Graph &g, const TensorMap &inputs, const std::vector<Tensor> &values,
                     NodeId node);

/// A mask_mod evaluated at every (q, kv) of one (batch, head): keep[q * len_kv + kv] is 1
/// where the mask keeps the score.
struct MaskMap {
  std::int64_t len_q = 0, len_kv = 0;
  std::vector<std::uint8_t> keep;
  bool at(std::int64_t q, std::int64_t kv) const { return keep[q * len_kv + kv] != 0; }
  std::int64_t kept() const;
};

/// The mask of node `node` of g (an attention or mask node; an attention without a mask
/// keeps everything) at batch b and (query) head h, on `inputs`, evaluated as run()
/// evaluates it: the captured tensors it reads are computed from the inputs first. Errors
/// (a load out of bounds, b or h out of range) are qkv::Error naming the op and the mod.
MaskMap mask_map(const Graph &g, const TensorMap &inputs, NodeId node, std::int64_t b,
                 std::int64_t h);

/// mask_map one row at a time, for masks too large to hold at once (`qkv show` at
/// L = 100000): node's mask at batch b and head h on `inputs`, its captured tensors
/// computed once. g must outlive it. Errors as mask_map's.
class MaskRows {
public:
  MaskRows(const Graph &g, const TensorMap &inputs, NodeId node, std::int64_t b, std::int64_t h);
  ~MaskRows();
  MaskRows(MaskRows &&) noexcept;
  std::int64_t len_q() const;
  std::int64_t len_kv() const;
  /// keep[j - kv_begin] = 1 where query i keeps key j, for j in [kv_begin, kv_end).
  void row(std::int64_t i, std::int64_t kv_begin, std::int64_t kv_end, std::uint8_t *keep) const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The (q, kv) pairs node's mask keeps, summed over every batch and head: the pairs whose
/// scores count. The mask is evaluated once per batch and head it depends on (once in
/// all when it reads neither b nor h).
std::int64_t kept_pairs(const Graph &g, const TensorMap &inputs, NodeId node);

} // namespace qkv::reference
