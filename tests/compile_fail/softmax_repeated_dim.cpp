// Must not compile: softmax by a name that is on two axes: L in (L, L) is ambiguous.
// EXPECT: dim_is_not_repeated<qkv::ops::softmax
// EXPECT: "L"}
// EXPECT: on two axes
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  constexpr auto L = dim<"L">;
  auto s = g.input<f32>("s", L, L);
  auto p = softmax(s, L);
}
