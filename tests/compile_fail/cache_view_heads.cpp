// Must not compile: the cache and this step's new rows have different kv heads.
// EXPECT: holds<qkv::ops::cache_view, qkv::shape::Rule::cache_heads_and_head_dim_match
// EXPECT: must share kv heads \(dim 1\) and head dim
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  auto past = g.input<f32>("k_past", dim<"B">, dim<"Hkv", 2>, dim<"C", 64>, dim<"Dh", 64>);
  auto fresh = g.input<f32>("k_new", dim<"B">, dim<"H", 8>, dim<"n">, dim<"Dh", 64>);
  auto len = g.input<i64>("lengths", dim<"B">);
  auto kv = cache_view(past, len, fresh);
}
