// Must not compile: softmax needs a float tensor, not i32 ids.
// EXPECT: holds<qkv::ops::softmax, qkv::shape::Rule::is_float_tensor, qkv::i32>
// EXPECT: needs float tensors
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  auto ids = g.input<i32>("ids", dim<"L">);
  auto s = softmax(ids);
}
