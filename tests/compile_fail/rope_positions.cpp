// Must not compile: rope's positions must be (L) or (B, L) of x (B, H, L, Dh).
// EXPECT: Rule::rope_positions_match_rows,
// EXPECT: positions must be \(L\) or \(B, L\)
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  auto x = g.input<f32>("q", dim<"B">, dim<"H", 8>, dim<"L">, dim<"Dh", 64>);
  auto pos = g.input<i64>("positions", dim<"H", 8>, dim<"L">);
  auto r = rope(x, pos);
}
