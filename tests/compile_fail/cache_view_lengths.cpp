// Must not compile: a cache's lengths are integers, one per sequence.
// EXPECT: holds<qkv::ops::cache_view, qkv::shape::Rule::cache_lengths_are_batch
// EXPECT: lengths must be an integer
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  auto past = g.input<f32>("k_past", dim<"B">, dim<"Hkv", 2>, dim<"C", 64>, dim<"Dh", 64>);
  auto fresh = g.input<f32>("k_new", dim<"B">, dim<"Hkv", 2>, dim<"n">, dim<"Dh", 64>);
  auto len = g.input<f32>("lengths", dim<"B">);
  auto kv = cache_view(past, len, fresh);
}
