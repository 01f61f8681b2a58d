// Must not compile: linear's bias must be 1-D with the weight's output dim: (K) vs N.
// EXPECT: Rule::linear_bias_is_weight_out_dim,
// EXPECT: "K"}, 16>
// EXPECT: "N"}, 32>
// EXPECT: weight's output dim
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  constexpr auto K = dim<"K", 16>;
  auto x = g.input<f32>("x", dim<"L">, K);
  auto w = g.param<f32>("w", K, dim<"N", 32>);
  auto b = g.param<f32>("b", K);
  auto y = linear(x, w, b);
}
