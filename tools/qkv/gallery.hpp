// The built-in gallery of graphs: what `qkv list/dump/run/bench` work on, and what the
// differential tests compile against the interpreter.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <qkv/dsl/graph.hpp>

namespace qkv::gallery {

struct Entry {
  std::string name;
  std::string description;
  std::function<Graph()> build;
  /// Extents for the dynamic dims: the default first, then more shapes the tests use
  /// (including 1 and odd sizes).
  std::vector<DimBindings> shapes;
};

const std::vector<Entry> &entries();
/// The entry with this name; throws qkv::Error listing the names otherwise.
const Entry &find(const std::string &name);

} // namespace qkv::gallery
