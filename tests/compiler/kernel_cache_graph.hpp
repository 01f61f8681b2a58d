// The graph the kernel cache tests compile, shared with their helper process.
#pragma once

#include <string>

#include <qkv/dsl/graph.hpp>

namespace qkv::test {

/// Causal attention then a projection: small enough to compile in a fraction of a second,
/// with a mask, a matmul, static dims and dynamic ones, so each part of the key shows.
inline Graph attention_graph(const std::string &name = "cached_attn", std::int64_t dh = 16,
                             bool causal = true) {
  Graph g(name);
  Dim B = g.dim("B"), H = g.dim("H", 2), L = g.dim("L"), Dh = g.dim("Dh", dh);
  Value q = g.input("q", DType::F32, {B, H, L, Dh});
  Value k = g.input("k", DType::F32, {B, H, L, Dh});
  Value v = g.input("v", DType::F32, {B, H, L, Dh});
  Value w = g.param("w", DType::F32, {Dh, Dh});
  Attention a = attention(q, k, v);
  if (causal)
    a.mask([](auto, auto, auto i, auto j) { return i >= j; });
  g.output("y", linear(a.value(), w));
  return g;
}

} // namespace qkv::test
