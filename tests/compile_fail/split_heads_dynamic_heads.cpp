// Must not compile: split_heads needs a static head count.
// EXPECT: Rule::split_heads_heads_are_static,
// EXPECT: "H"}, -1>
// EXPECT: must be static
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  constexpr auto H = dim<"H">;
  constexpr auto Dh = dim<"Dh", 64>;
  auto x = g.input<f32>("x", dim<"L">, H * Dh);
  auto y = split_heads(x, H, Dh);
}
