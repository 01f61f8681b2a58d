// Must not compile: slopes[qi, ki] on a 1-D tensor is C++20's comma operator, a load of
// slopes[ki] (past its H entries, where the interpreter and the kernel would disagree).
// EXPECT: a comma between mod values: t.i, j. is C.+'s comma operator and would load t.j.
// EXPECT: index a tensor with more dims as t.i, j.
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  auto q = g.input<f32>("q", dim<"H", 8>, dim<"L">, dim<"Dh", 64>);
  auto slopes = g.param<f32>("slopes", dim<"H", 8>);
  auto o = attention(q, q, q).score_mod([&](auto s, auto b, auto h, auto qi, auto ki) {
    return s + slopes[qi, ki];
  });
}
