// Must not compile: A mask_mod returns a condition; q - kv is a number.
// EXPECT: mask_mod must return a condition
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  auto q = g.input<f32>("q", dim<"L">, dim<"Dh", 64>);
  auto o = attention(q, q, q).mask([](auto b, auto h, auto qi, auto ki) { return qi - ki; });
}
