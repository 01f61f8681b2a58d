// Must not compile: Grouped-query attention needs both head counts static.
// EXPECT: holds<qkv::ops::attention, qkv::shape::Rule::attention_grouped_heads_are_static
// EXPECT: "H"}, 8>
// EXPECT: "G"}, -1>
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  constexpr auto Dh = dim<"Dh", 64>;
  auto q = g.input<f32>("q", dim<"H", 8>, dim<"L">, Dh);
  auto k = g.input<f32>("k", dim<"G">, dim<"S">, Dh);
  auto o = attention(q, k, k);
}
