// Must not compile: q, k and v must have the same number of dims.
// EXPECT: holds<qkv::ops::attention, qkv::shape::Rule::ranks_equal
// EXPECT: same number of dims
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  constexpr auto Dh = dim<"Dh", 64>;
  auto q = g.input<f32>("q", dim<"H", 8>, dim<"L">, Dh);
  auto k = g.input<f32>("k", dim<"S">, Dh);
  auto o = attention(q, k, k);
}
