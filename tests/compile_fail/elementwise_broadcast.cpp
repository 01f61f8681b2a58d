// Must not compile: For a + b the shorter operand's dims must end the longer's: (L, N) does not end (B, L, K).
// EXPECT: holds<qkv::ops::add, qkv::shape::Rule::shorter_shape_ends_longer
// EXPECT: "N"}, 32>
// EXPECT: "K"}, 16>
// EXPECT: shapes do not match
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  auto a = g.input<f32>("a", dim<"B">, dim<"L">, dim<"K", 16>);
  auto c = g.input<f32>("c", dim<"L">, dim<"N", 32>);
  auto y = a + c;
}
