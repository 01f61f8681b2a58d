// Must not compile: Grouped-query attention: 8 query heads cannot share 3 kv heads.
// EXPECT: holds<qkv::ops::attention,.*Rule::attention_query_heads_are_a_multiple_of_kv_heads
// EXPECT: "H"}, 8>
// EXPECT: "G"}, 3>
// EXPECT: whole number of query heads per kv head
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  constexpr auto Dh = dim<"Dh", 64>;
  auto q = g.input<f32>("q", dim<"H", 8>, dim<"L">, Dh);
  auto k = g.input<f32>("k", dim<"G", 3>, dim<"S">, Dh);
  auto o = attention(q, k, k);
}
