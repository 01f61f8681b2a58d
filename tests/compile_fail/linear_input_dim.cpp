// Must not compile: the classic mix-up, linear(q, wk) where q ends in Dh and wk starts with D.
// EXPECT: Rule::linear_input_dim_is_weight_first_dim,
// EXPECT: "Dh"}, 64>
// EXPECT: "D"}, 512>
// EXPECT: the input's last dim must be the weight's first dim
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  constexpr auto H = dim<"H", 8>;
  constexpr auto Dh = dim<"Dh", 64>;
  auto q = g.input<f32>("q", dim<"L">, Dh);
  auto wk = g.param<f32>("wk", dim<"D", 512>, H * Dh);
  auto k = linear(q, wk);
}
