// Must not compile: linear's weight has 2 dims (in, out).
// EXPECT: holds<qkv::ops::linear, qkv::shape::Rule::rank_is_2
// EXPECT: must have 2 dims
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  constexpr auto K = dim<"K", 16>;
  auto x = g.input<f32>("x", dim<"L">, K);
  auto w = g.param<f32>("w", dim<"C", 2>, K, dim<"N", 32>);
  auto y = linear(x, w);
}
