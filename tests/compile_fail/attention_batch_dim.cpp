// Must not compile: q, k and v must share the batch dim: B vs C.
// EXPECT: holds<qkv::ops::attention, qkv::shape::Rule::attention_batch_dims_match
// EXPECT: "B"}
// EXPECT: "C"}
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  constexpr auto H = dim<"H", 8>;
  constexpr auto Dh = dim<"Dh", 64>;
  auto q = g.input<f32>("q", dim<"B">, H, dim<"L">, Dh);
  auto k = g.input<f32>("k", dim<"C">, H, dim<"L">, Dh);
  auto o = attention(q, k, k);
}
