// Must not compile: t[i] is for 1-D tensors; a (H, R) bias needs bias(h, r).
// EXPECT: load_has_one_index_per_dim<
// EXPECT: "R"}, 9> ?>, 1>
// EXPECT: t.i. loads from a 1-D tensor
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  auto q = g.input<f32>("q", dim<"H", 8>, dim<"L">, dim<"Dh", 64>);
  auto bias = g.param<f32>("bias", dim<"H", 8>, dim<"R", 9>);
  auto o = attention(q, q, q).score_mod([&](auto s, auto b, auto h, auto qi, auto ki) {
    return s + bias[h];
  });
}
