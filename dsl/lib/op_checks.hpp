// Small helpers of the op builders (ops.cpp) and the shape rules (op_table.cpp): how an
// error names a tensor.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include <qkv/dsl/graph.hpp>

namespace qkv::detail {

/// 'name'
inline std::string q(const std::string &s) { return "'" + s + "'"; }

/// 'x' (B, L, D)
inline std::string who(const Node &n) { return q(n.name) + " " + describe(n.dims); }

} // namespace qkv::detail
