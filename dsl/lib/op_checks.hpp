// Small helpers of the op builders (ops.cpp) and the shape rules (op_table.cpp): how an
// error names a tensor, and a dim as the shared shape rules see it.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include <qkv/dsl/graph.hpp>
#include <qkv/dsl/shape_rules.hpp>

namespace qkv::detail {

/// 'name'
inline std::string q(const std::string &s) { return "'" + s + "'"; }

/// 'x' (B, L, D)
inline std::string who(const Node &n) { return q(n.name) + " " + describe(n.dims); }

// shape_rules.hpp stands alone (no dim.hpp): its extent of a dim bound at run time must
// be the DSL's.
static_assert(shape::kDynamicExtent == kDynamic);

/// A dim as the shared shape rules see it (<qkv/dsl/shape_rules.hpp>).
inline shape::DimView view_of(const Dim &d) { return {d.name, d.extent, is_unknown(d)}; }

} // namespace qkv::detail
