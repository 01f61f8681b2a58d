// Must not compile: Both operands of matmul must have one dtype.
// EXPECT: holds<qkv::ops::matmul, qkv::shape::Rule::same_dtype, qkv::f32, qkv::f64>
// EXPECT: same dtype
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  auto a = g.input<f32>("a", dim<"L">, dim<"K", 16>);
  auto b = g.input<f64>("b", dim<"K", 16>, dim<"N", 32>);
  auto c = matmul(a, b);
}
