// The words of a failed bounds check, shared by the reference interpreter and the
// checked kernels (qkv/runtime/checks.hpp), so that both report one load alike.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <qkv/dsl/graph.hpp>
#include <qkv/runtime/tensor.hpp>

namespace qkv::detail {

/// Where in the scores a mod was evaluated.
struct ModAt {
  std::int64_t b = 0, h = 0, q = 0, kv = 0;
};

/// "[2, 4]".
std::string shape_str(const Shape &s);
/// "(b=0, h=1, q=2, kv=3)".
std::string mod_position(const ModAt &at);

/// "<op> '<name>': <mod> loads '<t>'[i, j] out of bounds: index j on dim ... of '<t>'
/// [shape], in `<expression>` at (b=.., h=.., q=.., kv=..)". `idx` must be out of bounds
/// of `shape` on some axis; the first such axis is named.
std::string mod_load_out_of_bounds(const Graph &g, const Node &op, std::string_view mod,
                                   const ExprNode &load, const Shape &idx, const Shape &shape,
                                   const ModAt &at);

/// "<op> '<name>': <mod>: integer division by zero in `<expression>` at (b=.., ...)"
/// (or "remainder by zero"); for a divisor other than 0, "integer division overflows"
/// (INT64_MIN / -1).
std::string mod_division_error(const Graph &g, const Node &op, std::string_view mod,
                               const ExprNode &e, std::int64_t divisor, const ModAt &at);

} // namespace qkv::detail
