// Must not compile: A mod is traced once with symbolic values: `if` cannot branch on them.
// EXPECT: no truth value while the mod is traced
// EXPECT: qkv::select
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  auto q = g.input<f32>("q", dim<"L">, dim<"Dh", 64>);
  auto o = attention(q, q, q).score_mod([](auto s, auto b, auto h, auto qi, auto ki) {
    if (qi >= ki)
      return s;
    return s * 0.5;
  });
}
