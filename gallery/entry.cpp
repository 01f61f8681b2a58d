// Entries: the graphs the gallery, a user's tool and the benchmarks take by name.
#include "entry.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include <qkv/runtime/kernel.hpp>

namespace qkv::gallery {

namespace {

/// The shape field a dynamic dim is bound from: B the batch, L the query length, S (or a
/// KV cache's capacity C) the key length; a user's other dims are in GraphShape::other.
std::int64_t &extent_of(GraphShape &s, const std::string &d) {
  if (d == "B")
    return s.batch;
  if (d == "L")
    return s.seq;
  if (d == "S" || d == "C")
    return s.kv_len;
  return s.other[d];
}

} // namespace

DimBindings Entry::dims(const GraphShape &s) const {
  DimBindings b;
  GraphShape copy = s;
  for (const std::string &d : dynamic)
    b[d] = extent_of(copy, d);
  if (s.paged && workload.cache) {
    b.erase("C");
    b["M"] = s.pages_per_seq();
    b["P"] = s.batch * s.pages_per_seq();
  }
  return b;
}

GraphShape Entry::with_dims(GraphShape s, const DimBindings &bindings) const {
  for (const auto &[d, n] : bindings) {
    if (std::find(dynamic.begin(), dynamic.end(), d) == dynamic.end()) {
      std::string names;
      for (const std::string &x : dynamic)
        names += (names.empty() ? "" : ", ") + x;
      user_error("graph '" + name + "' has no dynamic dim '" + d + "' (its dynamic dims: " +
                 (names.empty() ? "none" : names) + ")");
    }
    extent_of(s, d) = n;
  }
  return s;
}

bool Entry::self_attention() const {
  // Keys from the queries' own sequence: the graph has no key length (S, or a cache's C)
  // of its own.
  return std::all_of(dynamic.begin(), dynamic.end(),
                     [](const std::string &d) { return d == "B" || d == "L"; });
}

bool Entry::uses_window() const {
  return workload.mask == Workload::Mask::Window || window;
}

TensorMap Entry::inputs(const Graph &g, const GraphShape &s, std::uint64_t seed,
                        bool scale_weights) const {
  if (!given_inputs.empty())
    return given_inputs;
  TensorMap in = random_weighted_inputs(g, dims(s), seed, scale_weights);
  if (prepare)
    prepare(in, s);
  return in;
}

TensorMap random_weighted_inputs(const Graph &g, const DimBindings &dims, std::uint64_t seed,
                                 bool scale_weights) {
  return random_inputs(g, dims, RandomOptions{.seed = seed, .scale_params = scale_weights});
}

std::string Entry::sizes(const GraphShape &s) const {
  std::string out;
  auto put = [&](const std::string &name, std::int64_t v) {
    out += (out.empty() ? "" : " ") + name + "=" + std::to_string(v);
  };
  if (user) { // its dynamic dims as bound, then its static ones
    for (const auto &[d, n] : dims(s))
      put(d, n);
    return statics.empty() ? out : out + (out.empty() ? "" : " ") + statics;
  }
  // Only the single-head seed graph has no batch dim, and no heads either.
  bool seed = std::find(dynamic.begin(), dynamic.end(), "B") == dynamic.end();
  if (!seed) {
    put("B", s.batch);
    put("H", s.heads);
  }
  if (s.kv_heads != s.heads)
    put("Hkv", s.kv_heads);
  put("L", s.seq);
  if (!self_attention())
    put("S", s.kv_len);
  put("Dh", s.head_dim);
  if (workload.form == Workload::Form::Block && !seed)
    put("D", s.model_dim());
  if (uses_window())
    put("W", s.window);
  if (s.paged)
    put("page", GraphShape::kPageRows);
  if (s.dtype != DType::F32)
    out += " " + std::string(dtype_name(s.dtype));
  return out;
}

const Entry &find_entry(const std::vector<Entry> &list, const std::string &name,
                        const std::string &kind) {
  std::string names;
  for (const Entry &e : list) {
    if (e.name == name)
      return e;
    names += (names.empty() ? "" : ", ") + e.name;
  }
  user_error("no " + kind + " named '" + name + "'; try one of: " +
             (names.empty() ? std::string("(none registered)") : names));
}

} // namespace qkv::gallery
