// Must not compile: swiglu's gate and up must have the same dims.
// EXPECT: holds<qkv::ops::swiglu, qkv::shape::Rule::same_dims
// EXPECT: "D"}, 512>
// EXPECT: "F"}, 2048>
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  auto a = g.input<f32>("a", dim<"L">, dim<"D", 512>);
  auto b = g.input<f32>("b", dim<"L">, dim<"F", 2048>);
  auto y = swiglu(a, b);
}
