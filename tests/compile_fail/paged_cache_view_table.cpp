// Must not compile: a block table has one row per sequence: (B, pages per sequence).
// EXPECT: Rule::paged_cache_table_is_batch
// EXPECT: block table must be an integer
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  auto pool = g.input<f32>("k_pool", dim<"P">, dim<"Hkv", 2>, dim<"page", 16>, dim<"Dh", 64>);
  auto table = g.input<i32>("table", dim<"M", 4>);
  auto fresh = g.input<f32>("k_new", dim<"B">, dim<"Hkv", 2>, dim<"n">, dim<"Dh", 64>);
  auto len = g.input<i64>("lengths", dim<"B">);
  auto kv = paged_cache_view(pool, table, len, fresh);
}
