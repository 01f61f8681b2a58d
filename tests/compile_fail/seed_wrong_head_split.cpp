// Must not compile: the wrong split that examples/seed_three_matmuls.cpp shows (and whose
// message it quotes). D = 8 cut into H = 2 heads of Dh = 3: the last dim is named H*Dh, but
// its extent 8 is not 2 x 3 (a match by the name alone once let this through).
// EXPECT: Rule::split_heads_last_dim_is_heads_times_head_dim,
// EXPECT: "H\*Dh"}, 8>
// EXPECT: "H"}, 2>
// EXPECT: "Dh"}, 3>
// EXPECT: heads . head_dim
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  constexpr auto D = dim<"D", 8>;
  constexpr auto H = dim<"H", 2>;
  constexpr auto Dh = dim<"Dh", 4>;
  Graph g("multi_head");
  auto x = g.input<f64>("x", dim<"B">, dim<"L">, D);
  auto wq = g.param<f64>("Wq", D, H * Dh);
  auto qh = split_heads(linear(x, wq), H, dim<"Dh", 3>);
}
