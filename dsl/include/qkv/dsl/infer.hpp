// Shape and dtype inference: the one place each op's shape rule lives. Op builders call it
// before adding a node; Graph::verify calls it again on every node.
#pragma once

#include <string>
#include <vector>

#include <qkv/dsl/graph.hpp>

namespace qkv {

struct InferredType {
  DType dtype;
  std::vector<Dim> dims;
};

/// The output type of `op` applied to `inputs` (nodes of g) with `attrs`. Throws
/// qkv::Error with a message that names the op, the tensors and the dims.
InferredType infer_type(const Graph &g, OpKind op, const std::vector<NodeId> &inputs,
                        const Attrs &attrs);

/// Normalises a possibly negative axis of a rank-`rank` tensor; throws naming `what`.
int normalize_axis(std::int64_t axis, int rank, const std::string &what);

} // namespace qkv
