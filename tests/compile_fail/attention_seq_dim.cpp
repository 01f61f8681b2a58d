// Must not compile: k and v must share the sequence dim: S vs L.
// EXPECT: holds<qkv::ops::attention, qkv::shape::Rule::attention_k_v_seq_dims_match
// EXPECT: "S"}
// EXPECT: "L"}
// EXPECT: share the sequence dim
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  constexpr auto H = dim<"H", 8>;
  constexpr auto Dh = dim<"Dh", 64>;
  auto q = g.input<f32>("q", H, dim<"L">, Dh);
  auto k = g.input<f32>("k", H, dim<"S">, Dh);
  auto o = attention(q, k, q);
}
