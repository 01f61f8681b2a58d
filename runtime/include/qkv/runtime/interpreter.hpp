// The reference interpreter: runs any Graph in double precision with plain loops. It
// defines what every op means; every compiled path is tested against it.
//
// Semantics worth stating: softmax subtracts the row maximum; a row whose entries are all
// -inf (fully masked) gives 0, never NaN; masks and mods are applied exactly as their
// expression trees say (score_mod first, then the mask, then softmax); a mod that loads
// out of bounds or divides an integer by zero is a qkv::Error naming the mod and the
// position, not undefined behaviour.
#pragma once

#include <qkv/dsl/graph.hpp>
#include <qkv/runtime/tensor.hpp>

namespace qkv::reference {

/// Runs g on `inputs` (inputs and params by name). Binds run-time dims from the tensors
/// (qkv::bind_dims) and reports mismatches as qkv::Error. Outputs are f64, keyed by the
/// graph's output names.
TensorMap run(const Graph &g, const TensorMap &inputs);

/// Like run(), but returns every node's value (index = NodeId), for step-by-step
/// walkthroughs and debugging.
std::vector<Tensor> run_all(const Graph &g, const TensorMap &inputs);

} // namespace qkv::reference
