// Must not compile: matmul contracts a's last dim with b's second-to-last: Dh vs D.
// EXPECT: Rule::matmul_contraction_dims_match,
// EXPECT: "Dh"}, 64>
// EXPECT: "D"}, 512>
// EXPECT: contraction dims differ
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  auto q = g.input<f32>("q", dim<"L">, dim<"Dh", 64>);
  auto k = g.input<f32>("k", dim<"D", 512>, dim<"S">);
  auto s = matmul(q, k);
}
