// Must not compile: slopes has one dim (H); slopes(h, q) indexes it with two.
// EXPECT: load_has_one_index_per_dim<qkv::TypedValue<qkv::f32, qkv::NamedDim<qkv::fixed_string<1>{"H"}, 8> ?>, 2>
// EXPECT: one index per dim
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  auto q = g.input<f32>("q", dim<"H", 8>, dim<"L">, dim<"Dh", 64>);
  auto slopes = g.param<f32>("slopes", dim<"H", 8>);
  auto o = attention(q, q, q).score_mod([&](auto s, auto b, auto h, auto qi, auto ki) {
    return s + slopes(h, qi);
  });
}
