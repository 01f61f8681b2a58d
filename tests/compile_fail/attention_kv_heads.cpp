// Must not compile: k and v must have the same heads dim.
// EXPECT: holds<qkv::ops::attention, qkv::shape::Rule::attention_k_v_heads_match
// EXPECT: "Hkv"}, 2>
// EXPECT: "H"}, 8>
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  constexpr auto Dh = dim<"Dh", 64>;
  constexpr auto S = dim<"S">;
  auto q = g.input<f32>("q", dim<"H", 8>, dim<"L">, Dh);
  auto k = g.input<f32>("k", dim<"Hkv", 2>, S, Dh);
  auto v = g.input<f32>("v", dim<"H", 8>, S, Dh);
  auto o = attention(q, k, v);
}
