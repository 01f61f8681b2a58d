// A Graph as JSON and back: how an ahead-of-time bundle (<qkv/runtime/bundle.hpp>) carries
// the graph its kernel computes, so that a process without the compiler binds, checks and
// runs its inputs as Kernel::run does for a compiled graph.
#pragma once

#include <string>
#include <string_view>

#include <qkv/dsl/graph.hpp>

namespace qkv {

/// g as JSON text: its name, dims (with their products and sums), nodes in order (op,
/// name, inputs, dtype, dims, every attribute that differs from its default, mods as
/// expression trees, constants' values) and outputs. Non-finite numbers are written as
/// the strings "inf", "-inf" and "nan". graph_from_json(graph_to_json(g)) has g's
/// key_text() and hash().
std::string graph_to_json(const Graph &g);

/// The graph graph_to_json wrote, rebuilt through Graph's own builders and verified
/// (Graph::verify), so a graph that breaks a shape rule is refused as one built in C++
/// would be. Malformed text (not JSON, an unknown op, a missing field, a field of the
/// wrong type, an input that names a later node) is a qkv::Error that starts with
/// "graph JSON:" and says where.
Graph graph_from_json(std::string_view text);

} // namespace qkv
