// A stack of identical layers (what find_repeated_blocks looks for), for the DSL's and
// the compiler's tests of repeated layers.
#pragma once

#include <string>

#include <qkv/dsl/graph.hpp>

namespace qkv::test {

struct LayerOptions {
  double eps = 1e-5;
  int odd_layer = -1;         // this layer gets eps * 2
  bool output_middle = false; // layer 1's hidden value is also a graph output
  bool masked = false;        // attention masked by the shared `lengths`
  DType dtype = DType::F32;
};

/// One layer of 9 ops (10 with attention) on x (B, L, D) with its own 6 params.
inline Value stack_layer(Graph &g, Value x, int i, const LayerOptions &o, Value lengths) {
  Dim D("D", 16), F("F", 32), H("H", 2), Dh("Dh", 8);
  std::string p = "layer" + std::to_string(i) + ".";
  // Made in this order, before the ops (an argument list's order is unspecified).
  Value w1 = g.param(p + "w1", o.dtype, {D, F});
  Value b1 = g.param(p + "b1", o.dtype, {F});
  Value w2 = g.param(p + "w2", o.dtype, {F, D});
  Value b2 = g.param(p + "b2", o.dtype, {D});
  Value gamma = g.param(p + "g", o.dtype, {D});
  Value beta = g.param(p + "b", o.dtype, {D});
  Value h = gelu(linear(x, w1, b1));
  if (i == 1 && o.output_middle)
    g.output("middle", h);
  h = linear(h, w2, b2);
  if (o.masked) {
    Value q = split_heads(h, H, Dh);
    Attention a = attention(q, q, q);
    a.mask([lengths](Expr b, Expr, Expr, Expr kv) { return kv < lengths[b]; });
    h = merge_heads(a, D);
  }
  h = scale(h, 0.5);
  Value y = add(x, h);
  y = layer_norm(y, gamma, beta, i == o.odd_layer ? o.eps * 2 : o.eps);
  return add(y, silu(y));
}

inline Graph layer_stack(int n, const LayerOptions &o = {}) {
  Graph g("stack");
  Dim B("B"), L("L"), D("D", 16);
  Value x = g.input("x", o.dtype, {B, L, D});
  Value lengths = g.input("lengths", DType::I64, {B});
  x = scale(x, 2.0); // something before the layers
  for (int i = 0; i < n; ++i)
    x = stack_layer(g, x, i, o, lengths);
  g.output("y", softmax(x));
  return g;
}

} // namespace qkv::test
