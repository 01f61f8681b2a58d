// Must not compile: embedding's ids must be integers, not f32.
// EXPECT: holds<qkv::ops::embedding, qkv::shape::Rule::is_integer_tensor, qkv::f32>
// EXPECT: must be an integer tensor
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  auto ids = g.input<f32>("ids", dim<"L">);
  auto table = g.param<f32>("table", dim<"V", 1000>, dim<"D", 512>);
  auto e = embedding(ids, table);
}
