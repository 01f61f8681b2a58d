// Must not compile: a tensor index inside a mod must be an integer; half a distance is a
// float. (The untyped Value::load reports the same when the mod is traced.)
// EXPECT: load_index_is_integer
// EXPECT: a tensor index inside a mod must be an integer
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  auto q = g.input<f32>("q", dim<"L">, dim<"Dh", 64>);
  auto bias = g.param<f32>("bias", dim<"R", 64>);
  auto o = attention(q, q, q).score_mod(
      [&](auto s, auto b, auto h, auto qi, auto ki) { return s + bias[(ki - qi) * 0.5]; });
}
