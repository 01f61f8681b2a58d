// Must not compile: merge_heads(o, M): 8 heads of 64 make 512 features, not M = 256.
// EXPECT: Rule::merge_heads_out_is_heads_times_head_dim,
// EXPECT: "H"}, 8>
// EXPECT: "M"}, 256>
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  auto o = g.input<f32>("o", dim<"H", 8>, dim<"L">, dim<"Dh", 64>);
  auto y = merge_heads(o, dim<"M", 256>);
}
