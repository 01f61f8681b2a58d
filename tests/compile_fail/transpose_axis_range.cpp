// Must not compile: transpose<0, 3> on a 3-D tensor.
// EXPECT: holds<qkv::ops::transpose, qkv::shape::Rule::axis_in_range
// EXPECT: out of range
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  auto x = g.input<f32>("x", dim<"B">, dim<"L">, dim<"D", 512>);
  auto y = transpose<0, 3>(x);
}
