// Must not compile: concat's joined dim is named by its last argument only; a dim between
// the tensors is refused by name, not by a failure deep in the rule's instantiation.
// EXPECT: only the last argument may be a dim
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  auto a = g.input<f32>("a", dim<"L">, dim<"K", 16>);
  auto c = concat(a, dim<"X", 32>, a);
}
