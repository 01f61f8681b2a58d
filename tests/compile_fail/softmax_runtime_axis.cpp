// Must not compile: A typed softmax needs its axis at compile time.
// EXPECT: typed softmax takes its axis as a template argument
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  auto s = g.input<f32>("s", dim<"L">, dim<"S">);
  auto p = softmax(s, 0);
}
