// Must not compile: q and k must share the head dim: Dh vs D.
// EXPECT: holds<qkv::ops::attention, qkv::shape::Rule::attention_q_k_head_dims_match
// EXPECT: "Dh"}, 64>
// EXPECT: "D"}, 512>
// EXPECT: share the head dim
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  constexpr auto H = dim<"H", 8>;
  auto q = g.input<f32>("q", H, dim<"L">, dim<"Dh", 64>);
  auto k = g.input<f32>("k", H, dim<"S">, dim<"D", 512>);
  auto o = attention(q, k, k);
}
