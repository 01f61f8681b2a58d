// Must not compile: softmax over a dim the tensor does not have: D in (L, S).
// EXPECT: dim_is_present<qkv::ops::softmax
// EXPECT: "D"}, 512>
// EXPECT: "L"}
// EXPECT: "S"}
// EXPECT: has no dim with this name
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  auto s = g.input<f32>("s", dim<"L">, dim<"S">);
  auto p = softmax(s, dim<"D", 512>);
}
