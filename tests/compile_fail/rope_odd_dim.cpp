// Must not compile: rope rotates pairs of features: a last dim of 63 cannot be rotated.
// EXPECT: Rule::rope_last_dim_is_static_and_even,
// EXPECT: "R"}, 63>
// EXPECT: static and even
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  auto x = g.input<f32>("x", dim<"L">, dim<"R", 63>);
  auto y = rope(x);
}
