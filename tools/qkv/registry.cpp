// A user's graphs made into entries, and the registry the qkv tool's commands look names
// up in.
#include "registry.hpp"

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

// ---- a user's graph ------------------------------------------------------------------------

namespace {

bool is_name(const std::string &s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
}

const Node *only_attention(const Graph &g) {
  const Node *found = nullptr;
  for (const Node &n : g.nodes())
    if (n.op == OpKind::Attention) {
      if (found)
        return nullptr;
      found = &n;
    }
  return found;
}

/// The argument of g named `name` when it is an f32 input or param of rank `rank`.
const Node *argument(const Graph &g, const char *name, OpKind op, int rank) {
  std::optional<NodeId> id = g.find_argument(name);
  if (!id)
    return nullptr;
  const Node &n = g.node(*id);
  return n.op == op && n.dtype == DType::F32 && n.rank() == rank ? &n : nullptr;
}

/// The form the baselines compute that a user's graph has, with the sizes they read from
/// its attention into `s`; or why it has none.
std::string infer_workload(const Graph &g, const std::string &name, const DimBindings &statics,
                           Workload &w, GraphShape &s) {
  const Node *att = only_attention(g);
  if (!att)
    return "they compute graphs with one softmax attention; '" + name + "' has " +
           (std::none_of(g.nodes().begin(), g.nodes().end(),
                         [](const Node &n) { return n.op == OpKind::Attention; })
                ? "none"
                : "several");
  const Node &q = g.node(att->inputs[0]), &k = g.node(att->inputs[1]);
  if (q.rank() != 4)
    return "they compute attention over (B, H, L, Dh) heads; the attention of '" + name +
           "' has " + std::to_string(q.rank()) + " dims";
  auto extent = [&](const Dim &d) {
    auto it = statics.find(d.name);
    return it == statics.end() ? std::int64_t{0} : it->second;
  };
  if (q.dims[0].name != "B" || q.dims[2].name != "L" ||
      (k.dims[2].name != "L" && k.dims[2].name != "S"))
    return "they read q (B, H, L, Dh) and k, v (B, Hkv, S or L, Dh), dims of those names; the "
           "attention of '" + name + "' reads q " + describe(q.dims) + " and k " +
           describe(k.dims);
  if (!extent(q.dims[1]) || !extent(k.dims[1]) || !extent(q.dims[3]))
    return "they need static heads and head dim; the attention of '" + name + "' reads q " +
           describe(q.dims) + " and k " + describe(k.dims);
  s.heads = extent(q.dims[1]);
  s.kv_heads = extent(k.dims[1]);
  s.head_dim = extent(q.dims[3]);
  // A static batch or length is the shape's (with_dims sets the dynamic ones).
  for (const Dim *d : {&q.dims[0], &q.dims[2], &k.dims[2]})
    if (d->is_static())
      (d == &q.dims[0] ? s.batch : d == &q.dims[2] ? s.seq : s.kv_len) = d->extent;
  w.mask = att->attrs.mask ? Workload::Mask::Expr : Workload::Mask::None;
  if (g.outputs().size() != 1)
    return "they compute graphs of one output; '" + name + "' has " +
           std::to_string(g.outputs().size());
  bool qkv_inputs = argument(g, "q", OpKind::Input, 4) && argument(g, "k", OpKind::Input, 4) &&
                    argument(g, "v", OpKind::Input, 4) && att->inputs[0] == *g.find_argument("q") &&
                    att->inputs[1] == *g.find_argument("k") &&
                    att->inputs[2] == *g.find_argument("v");
  if (qkv_inputs && g.outputs().begin()->second == att->id && g.outputs().begin()->first == "out") {
    w.form = Workload::Form::Attention;
    return "";
  }
  bool block = argument(g, "x", OpKind::Input, 3) && argument(g, "wq", OpKind::Param, 2) &&
               argument(g, "wk", OpKind::Param, 2) && argument(g, "wv", OpKind::Param, 2) &&
               g.outputs().begin()->first == "y";
  if (block) {
    w.form = Workload::Form::Block;
    w.cross = g.find_argument("memory").has_value();
    w.out_proj = argument(g, "wo", OpKind::Param, 2) != nullptr;
    const Node &x = g.node(*g.find_argument("x"));
    if (x.dims[0].name != "B" || x.dims[1].name != "L")
      return "their blocks read x (B, L, D), dims of those names; x of '" + name + "' is " +
             describe(x.dims);
    if (extent(x.dims[2]) != s.heads * s.head_dim)
      return "their blocks have a model dim of heads x head dim; x of '" + name + "' has " +
             describe(x.dims);
    return "";
  }
  return "they compute attention alone (inputs q, k, v (B, H, L, Dh) -> output \"out\") or a "
         "block of projections (input x (B, L, D), params wq, wk, wv [, wo] -> output \"y\"); '" +
         name + "' is neither";
}

} // namespace

Entry user_entry(const tool::GraphSpec &spec) {
  std::string who = "graph '" + spec.name + "'";
  user_check(is_name(spec.name), "a graph of the tool needs a name of letters, digits, '_' and "
                                 "'-', got '" + spec.name + "'");
  user_check(spec.build != nullptr, who + ": GraphSpec::build is empty");
  Graph g = spec.build();
  std::vector<std::string> dynamic;
  std::string statics;
  DimBindings fixed;
  for (const auto &[d, def] : g.dim_defs()) {
    if (def.kind != DimDef::Kind::Atomic)
      continue;
    if (def.extent == kDynamic) {
      dynamic.push_back(d);
    } else {
      statics += (statics.empty() ? "" : " ") + d + "=" + std::to_string(def.extent);
      fixed[d] = def.extent;
    }
  }
  auto check_dims = [&](const DimBindings &b, const char *field) {
    for (const std::string &d : dynamic)
      user_check(b.count(d) > 0, who + ": GraphSpec::" + field + " gives no extent for its "
                                     "dynamic dim '" + d + "'");
    try {
      complete_dims(g, b);
    } catch (const Error &e) {
      user_error(who + ": GraphSpec::" + field + ": " + e.what());
    }
  };
  check_dims(spec.dims, "dims");
  if (!spec.bench_dims.empty())
    check_dims(spec.bench_dims, "bench_dims");
  Entry e;
  e.name = spec.name;
  e.description = spec.description;
  e.make = [build = spec.build](const GraphShape &) { return build(); };
  e.dynamic = dynamic;
  e.user = true;
  e.statics = statics;
  GraphShape base;
  e.baseline_gap = infer_workload(g, spec.name, fixed, e.workload, base);
  auto shape_of = [&](const DimBindings &b) {
    GraphShape s = base;
    s = e.with_dims(s, [&] {
      DimBindings only;
      for (const std::string &d : dynamic)
        only[d] = b.at(d);
      return only;
    }());
    if (std::find(dynamic.begin(), dynamic.end(), "S") == dynamic.end() && !fixed.count("S"))
      s.kv_len = s.seq; // self-attention: --seq sets the key length too
    return s;
  };
  e.shape = shape_of(spec.dims);
  e.bench_shape = shape_of(spec.bench_dims.empty() ? spec.dims : spec.bench_dims);
  e.shapes = {e.dims(e.shape)};
  if (spec.prepare)
    e.prepare = [f = spec.prepare](TensorMap &in, const GraphShape &) { f(in); };
  return e;
}

Entry program_entry(const Graph &g, const TensorMap &inputs) {
  std::string name = g.name();
  for (char &c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-')
      c = '_';
  tool::GraphSpec spec;
  spec.name = name.empty() ? "graph" : name;
  spec.build = [g] { return g; };
  spec.dims = bind_dims(g, signature(inputs));
  Entry e = user_entry(spec);
  e.name = g.name();
  e.given_inputs = inputs;
  return e;
}

// ---- the registry --------------------------------------------------------------------------

namespace {

struct Registry {
  std::vector<Entry> entries;
  std::vector<tool::GraphSpec> pending; // add_graph's, made into entries on first use
};

Registry &registry() {
  static Registry r;
  return r;
}

} // namespace

void add_entry(Entry e) {
  user_check(is_name(e.name), "a graph of the tool needs a name of letters, digits, '_' and "
                              "'-', got '" + e.name + "'");
  user_check(e.name != "gemm", "graph 'gemm': the name is qkv bench gemm's; choose another");
  for (const Entry &x : registry().entries)
    user_check(x.name != e.name, "graph '" + e.name + "' is registered twice");
  registry().entries.push_back(std::move(e));
}

const std::vector<Entry> &registered() {
  Registry &r = registry();
  while (!r.pending.empty()) {
    tool::GraphSpec spec = std::move(r.pending.front());
    r.pending.erase(r.pending.begin());
    add_entry(user_entry(spec));
  }
  return r.entries;
}

const Entry &registered(const std::string &name) { return find_entry(registered(), name, "graph"); }

} // namespace qkv::gallery

namespace qkv::tool {

void add_graph(GraphSpec spec) { gallery::registry().pending.push_back(std::move(spec)); }

} // namespace qkv::tool
