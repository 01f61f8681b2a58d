// Must not compile: layer_norm's gamma must be the input's last dim: (K) vs D.
// EXPECT: holds<qkv::ops::layer_norm, qkv::shape::Rule::norm_param_is_last_dim
// EXPECT: "K"}, 16>
// EXPECT: "D"}, 512>
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  constexpr auto D = dim<"D", 512>;
  auto x = g.input<f32>("x", dim<"L">, D);
  auto gamma = g.param<f32>("gamma", dim<"K", 16>);
  auto beta = g.param<f32>("beta", D);
  auto y = layer_norm(x, gamma, beta);
}
