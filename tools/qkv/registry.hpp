// A user's graphs made into entries (<qkv/tool.hpp>'s GraphSpec), and the registry the qkv
// tool's commands look names up in: the gallery's entries that the qkv binary adds, or a
// user's tool's own graphs.
#pragma once

#include <string>
#include <vector>

#include <qkv/tool.hpp>

#include "entry.hpp"

namespace qkv::gallery {

/// The entry of a user's graph: it builds the graph once to learn its dims (each dynamic
/// one needs an extent in spec.dims), its static sizes and whether the baselines compute
/// it. A qkv::Error naming the graph when the spec or the graph is wrong.
Entry user_entry(const tool::GraphSpec &spec);

/// The entry of a program's own graph and inputs (qkv::tool::bench): user_entry at the extents
/// the inputs bind, with those inputs.
Entry program_entry(const Graph &g, const TensorMap &inputs);

// ---- the registry: the graphs this tool knows ----------------------------------------------

/// Adds an entry; a qkv::Error when its name is empty, not a plain word, "gemm" (qkv bench
/// gemm's) or taken.
void add_entry(Entry e);
/// Every entry, in the order they were added: add_entry's, then the specs of
/// tool::add_graph (made into entries on first use, so that a bad spec is an error of the
/// command, not of static initialisation).
const std::vector<Entry> &registered();
/// The registered entry with this name; a qkv::Error listing the names otherwise.
const Entry &registered(const std::string &name);

} // namespace qkv::gallery
