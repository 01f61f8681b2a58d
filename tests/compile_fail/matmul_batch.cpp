// Must not compile: matmul's batch dims must be equal unless one side is 2-D: (B) vs (C).
// EXPECT: Rule::matmul_batch_dims_match,
// EXPECT: "B"}
// EXPECT: "C"}
// EXPECT: batch dims differ
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  constexpr auto K = dim<"K", 16>;
  auto a = g.input<f32>("a", dim<"B">, dim<"L">, K);
  auto b = g.input<f32>("b", dim<"C">, K, dim<"N", 32>);
  auto c = matmul(a, b);
}
