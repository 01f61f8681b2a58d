// Must not compile: Dim names are identifiers; derived names come from H * Dh.
// EXPECT: a dim name must be an identifier
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  auto x = g.input<f32>("x", dim<"H*Dh", 512>);
}
