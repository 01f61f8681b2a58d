// Must not compile: concat(a, b, out): the parts sum to K+K = 32, which is not X = 40.
// EXPECT: Rule::concat_out_is_sum_of_parts,
// EXPECT: "K"}, 16>
// EXPECT: "X"}, 40>
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  auto a = g.input<f32>("a", dim<"L">, dim<"K", 16>);
  auto c = concat(a, a, dim<"X", 40>);
}
