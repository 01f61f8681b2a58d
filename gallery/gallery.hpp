// The built-in gallery of graphs: what the `qkv` binary's list/dump/run/bench/show work on,
// and what the differential tests compile against the interpreter. The blocks and
// attention graphs are built here from a GraphShape; the variants are the typed-DSL graphs
// of examples/gallery/ (variants.hpp).
#pragma once

#include <string>
#include <vector>

#include "entry.hpp"
#include "variants.hpp"

namespace qkv::gallery {

/// The gallery, in the order `qkv list` prints it.
const std::vector<Entry> &entries();
/// The gallery entry with this name; throws qkv::Error listing the names otherwise.
const Entry &find(const std::string &name);

} // namespace qkv::gallery
