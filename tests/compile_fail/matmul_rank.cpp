// Must not compile: matmul needs at least 2 dims on each side.
// EXPECT: holds<qkv::ops::matmul, qkv::shape::Rule::rank_at_least_2
// EXPECT: "K"}, 16>
// EXPECT: needs at least 2 dims
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  auto a = g.input<f32>("a", dim<"K", 16>);
  auto b = g.input<f32>("b", dim<"K", 16>, dim<"N", 32>);
  auto c = matmul(a, b);
}
