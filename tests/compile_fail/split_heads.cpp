// Must not compile: split_heads(x, H, Dh) needs x's last dim to be H*Dh: 512 is not 8 x 32.
// EXPECT: Rule::split_heads_last_dim_is_heads_times_head_dim,
// EXPECT: "D"}, 512>
// EXPECT: "H"}, 8>
// EXPECT: "Dh"}, 32>
// EXPECT: heads . head_dim
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  auto x = g.input<f32>("x", dim<"L">, dim<"D", 512>);
  auto y = split_heads(x, dim<"H", 8>, dim<"Dh", 32>);
}
