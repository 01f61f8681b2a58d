// Must not compile: rope needs a static last dim.
// EXPECT: Rule::rope_last_dim_is_static_and_even,
// EXPECT: "E"}, -1>
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  auto x = g.input<f32>("x", dim<"L">, dim<"E">);
  auto y = rope(x);
}
