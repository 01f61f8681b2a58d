// Must not compile: linear_attention has attention's rules.
// EXPECT: holds<qkv::ops::linear_attention, qkv::shape::Rule::attention_q_k_head_dims_match
// EXPECT: "Dh"}, 64>
// EXPECT: "D"}, 512>
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  auto q = g.input<f32>("q", dim<"L">, dim<"Dh", 64>);
  auto k = g.input<f32>("k", dim<"L">, dim<"D", 512>);
  auto o = linear_attention(q, k, k);
}
