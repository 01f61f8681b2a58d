// Must not compile: residual needs exactly the same dims; broadcasting is not enough.
// EXPECT: holds<qkv::ops::residual, qkv::shape::Rule::same_dims
// EXPECT: "D"}, 512>
// EXPECT: exactly the same dims
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  constexpr auto D = dim<"D", 512>;
  auto x = g.input<f32>("x", dim<"L">, D);
  auto b = g.param<f32>("b", D);
  auto y = residual(x, b);
}
