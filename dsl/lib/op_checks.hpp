// Small helpers of the op builders (ops.cpp) and the shape rules (op_table.cpp): how an
// error names a tensor, and when two dims are the same.
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

/// Dims are the same when their names are (a name fixes the extent in a graph); an unknown
/// dim (the dialect's `?`) is the same as any.
inline bool same_dim(const Dim &a, const Dim &b) {
  return a.name == b.name || is_unknown(a) || is_unknown(b);
}

inline bool same_dims(const std::vector<Dim> &a, const std::vector<Dim> &b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), same_dim);
}

} // namespace qkv::detail
