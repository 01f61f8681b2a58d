// Must not compile: merge_heads needs (..., H, L, Dh).
// EXPECT: holds<qkv::ops::merge_heads, qkv::shape::Rule::rank_at_least_3
// EXPECT: at least 3 dims
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  auto x = g.input<f32>("x", dim<"L">, dim<"D", 512>);
  auto y = merge_heads(x);
}
