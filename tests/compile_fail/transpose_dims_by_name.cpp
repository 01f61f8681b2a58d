// Must not compile: a typed transpose takes typed dims, not run-time names.
// EXPECT: typed transpose takes typed dims, transpose.x, L, D., not names
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  auto x = g.input<f32>("x", dim<"L">, dim<"D", 512>);
  auto y = transpose(x, "L", "D");
}
