// Must not compile: a typed softmax finds its axis by a typed dim, not by a run-time name.
// EXPECT: typed softmax takes a typed dim, softmax.x, S., not a name
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  auto s = g.input<f32>("s", dim<"L">, dim<"S">);
  auto p = softmax(s, "S");
}
