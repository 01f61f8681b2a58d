// The reference interpreter: runs any Graph in double precision with plain loops. It
// defines what every op means; every compiled path is tested against it.
//
// Semantics worth stating: softmax subtracts the row maximum; a row whose entries are all
// -inf (fully masked) gives 0, never NaN; masks and mods are applied exactly as their
// expression trees say (score_mod first, then the mask, then softmax), at every position
// and with every operand evaluated (&&, || and select do not short-circuit, as in a
// vectorised kernel); a mod that loads out of bounds or divides an integer by zero is a
// qkv::Error naming the op, the mod, the tensor and the position (b, h, q, kv), not
// undefined behaviour. Each eval_<op> in runtime/lib/interpreter.cpp states its op's
// semantics in full.
#pragma once

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

} // namespace qkv::reference
