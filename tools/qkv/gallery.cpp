// The gallery. Each graph is written the way a user would write it.
#include "gallery.hpp"

#include <cmath>

namespace qkv::gallery {

namespace {

/// The seed walkthrough (seed 000, "I love GPU programming"), written the seeds' way:
/// three matmuls and a softmax. qkv-recognize-attention turns it into one attention op.
Graph seed() {
  Graph g("seed");
  Dim L = g.dim("L"), D = g.dim("D", 6);
  Value x = g.input("x", DType::F32, {L, D});
  Value wq = g.param("wq", DType::F32, {D, D});
  Value wk = g.param("wk", DType::F32, {D, D});
  Value wv = g.param("wv", DType::F32, {D, D});
  Value q = matmul(x, wq).named("Q"), k = matmul(x, wk).named("K"), v = matmul(x, wv).named("V");
  Value scores = scale(matmul(q, transpose(k)), 1.0 / std::sqrt(6.0)).named("scaled");
  Value a = softmax(scores).named("A");
  g.output("out", matmul(a, v));
  return g;
}

/// Multi-head self-attention block: projections, split heads, attention, merge, output.
Graph mha_like(const char *name, bool causal, std::int64_t kv_heads, bool cross) {
  Graph g(name);
  Dim B = g.dim("B"), L = g.dim("L"), D = g.dim("D", 64);
  Dim H = g.dim("H", 4), Dh = g.dim("Dh", 16);
  Dim Hkv = kv_heads == 4 ? H : g.dim("Hkv", kv_heads);
  Value x = g.input("x", DType::F32, {B, L, D});
  Value src = x;
  if (cross) {
    Dim S = g.dim("S");
    src = g.input("memory", DType::F32, {B, S, D});
  }
  Dim KvD = kv_heads == 4 ? D : product(Hkv, Dh);
  Value wq = g.param("wq", DType::F32, {D, D});
  Value wk = g.param("wk", DType::F32, {D, KvD});
  Value wv = g.param("wv", DType::F32, {D, KvD});
  Value wo = g.param("wo", DType::F32, {D, D});
  Value q = split_heads(linear(x, wq), H, Dh).named("q");
  Value k = split_heads(linear(src, wk), Hkv, Dh).named("k");
  Value v = split_heads(linear(src, wv), Hkv, Dh).named("v");
  Attention att = attention(q, k, v);
  if (causal)
    att.mask(causal_mask());
  Value o = merge_heads(att.value().named("o"), D);
  g.output("y", linear(o, wo));
  return g;
}

std::vector<Entry> make() {
  std::vector<Entry> e;
  e.push_back({"seed",
               "the seeds' 4x6 walkthrough written as matmul/softmax/matmul (single head)",
               seed,
               {{{"L", 4}}, {{"L", 1}}, {{"L", 17}}}});
  e.push_back({"mha",
               "multi-head self-attention block, B and L dynamic (D=64, H=4, Dh=16)",
               [] { return mha_like("mha", false, 4, false); },
               {{{"B", 2}, {"L", 16}}, {{"B", 1}, {"L", 1}}, {{"B", 3}, {"L", 17}}}});
  e.push_back({"causal",
               "multi-head self-attention with a causal mask_mod (q >= kv)",
               [] { return mha_like("causal", true, 4, false); },
               {{{"B", 2}, {"L", 16}}, {{"B", 1}, {"L", 1}}, {{"B", 1}, {"L", 33}}}});
  e.push_back({"gqa",
               "grouped-query attention: 4 query heads share 2 kv heads",
               [] { return mha_like("gqa", false, 2, false); },
               {{{"B", 2}, {"L", 16}}, {{"B", 1}, {"L", 1}}, {{"B", 2}, {"L", 9}}}});
  e.push_back({"cross",
               "cross-attention: queries from x (L), keys/values from memory (S)",
               [] { return mha_like("cross", false, 4, true); },
               {{{"B", 2}, {"L", 8}, {"S", 12}},
                {{"B", 1}, {"L", 1}, {"S", 1}},
                {{"B", 1}, {"L", 5}, {"S", 17}}}});
  return e;
}

} // namespace

const std::vector<Entry> &entries() {
  static const std::vector<Entry> all = make();
  return all;
}

const Entry &find(const std::string &name) {
  std::string names;
  for (const Entry &e : entries()) {
    if (e.name == name)
      return e;
    names += (names.empty() ? "" : ", ") + e.name;
  }
  user_error("no gallery graph named '" + name + "'; try one of: " + names);
}

} // namespace qkv::gallery
