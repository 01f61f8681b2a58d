// Must not compile: a typed tensor is indexed only with what is an integer by type; a
// plain qkv::Expr parameter's type (integer or float) is known only when traced.
// EXPECT: load_index_is_integer<.*qkv::Expr>
// EXPECT: declare them auto or qkv::IntExpr, not qkv::Expr
#include <qkv/dsl.hpp>

using namespace qkv;

void build() {
  Graph g("g");
  auto q = g.input<f32>("q", dim<"H", 4>, dim<"L">, dim<"Dh", 64>);
  auto slopes = g.param<f32>("slopes", dim<"H", 4>);
  auto o = attention(q, q, q).score_mod(
      [&](Expr s, Expr b, Expr h, Expr qi, Expr ki) { return s + slopes[h] * (ki - qi); });
}
