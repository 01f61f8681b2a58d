// Must not compile: A score_mod returns the new score; a comparison is a condition.
// EXPECT: score_mod must return a number .the new score., not a condition
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  auto q = g.input<f32>("q", dim<"L">, dim<"Dh", 64>);
  auto o = attention(q, q, q).score_mod([](auto s, auto b, auto h, auto qi, auto ki) {
    return s > 0.0;
  });
}
