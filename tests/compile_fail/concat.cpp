// Must not compile: concat along the last axis needs the other dims equal: L vs S.
// EXPECT: Rule::concat_dims_off_the_axis_match,
// EXPECT: "L"}
// EXPECT: "S"}
// EXPECT: must match except along the axis
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  constexpr auto K = dim<"K", 16>;
  auto a = g.input<f32>("a", dim<"L">, K);
  auto b = g.input<f32>("b", dim<"S">, K);
  auto c = concat(a, b);
}
