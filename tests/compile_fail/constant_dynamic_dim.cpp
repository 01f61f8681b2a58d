// Must not compile: A constant's values are in the graph, so its dims must be static.
// EXPECT: constant_dims_are_static<
// EXPECT: "L"}, -1>
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  auto c = constant<f32>(g, "c", {1.0, 2.0}, dim<"L">);
}
