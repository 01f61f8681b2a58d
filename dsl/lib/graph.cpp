// Graph: nodes, dims, printing, hashing, verification and run-time dim binding.
#include <qkv/dsl/graph.hpp>

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

#include <qkv/dsl/op_table.hpp>
#include <qkv/dsl/shape_rules.hpp>

#include "format.hpp"

namespace qkv {

// ---- small things ----------------------------------------------------------------------

DType parse_dtype(std::string_view s) {
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32, DType::I64})
    if (dtype_name(t) == s)
      return t;
  user_error("unknown dtype '" + std::string(s) + "' (expected f32, f64, f16, bf16, i32, i64)");
}

Dim unknown_dim() { return Dim("?"); }

bool is_unknown(const Dim &d) { return d.name == "?"; }

/// Whether d is a dim of the dialect's verifier, named by its extent.
static bool named_by_extent(const Dim &d) {
  return d.is_static() && d.name == std::to_string(d.extent);
}

std::string describe(const Dim &d) {
  if (is_unknown(d) || named_by_extent(d))
    return d.name;
  return "'" + d.name + "'(" + (d.is_static() ? std::to_string(d.extent) : "dynamic") + ")";
}

std::string describe(const std::vector<Dim> &dims) {
  std::string s = "(";
  for (std::size_t i = 0; i < dims.size(); ++i)
    s += (i ? ", " : "") + dims[i].name;
  return s + ")";
}

std::string describe_full(const std::vector<Dim> &dims) {
  std::string s = "(";
  for (std::size_t i = 0; i < dims.size(); ++i)
    s += (i ? ", " : "") + dims[i].name + "=" +
         (dims[i].is_static() ? std::to_string(dims[i].extent) : "?");
  return s + ")";
}

Dim product(const Dim &a, const Dim &b) {
  if (is_unknown(a) || is_unknown(b))
    return unknown_dim();
  std::string name;
  shape::spell_product(a.name, b.name, [&](std::string_view piece) { name += piece; });
  std::int64_t e = kDynamic;
  if (a.is_static() && b.is_static() && __builtin_mul_overflow(a.extent, b.extent, &e))
    user_error("dim " + name + ": " + std::to_string(a.extent) + " * " + std::to_string(b.extent) +
               " overflows 64 bits");
  return Dim(name, e);
}

Dim sum(const std::vector<Dim> &parts) {
  std::int64_t e = 0;
  bool overflowed = false;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (is_unknown(parts[i]))
      return unknown_dim();
    if (e == kDynamic || parts[i].is_dynamic())
      e = kDynamic;
    else if (__builtin_add_overflow(e, parts[i].extent, &e))
      overflowed = true;
  }
  std::string name; // spelled once no part is unknown
  shape::spell_sum(
      parts.size(), [&](std::size_t i) -> const std::string & { return parts[i].name; },
      [&](std::string_view piece) { name += piece; });
  if (overflowed)
    user_error("dim " + name + ": the extents' sum overflows 64 bits");
  return Dim(name, e);
}

std::string_view feature_map_name(FeatureMap f) {
  return f == FeatureMap::EluPlusOne ? "elu_plus_one" : "relu";
}

std::optional<FeatureMap> parse_feature_map(std::string_view name) {
  for (FeatureMap f : {FeatureMap::EluPlusOne, FeatureMap::Relu})
    if (name == feature_map_name(f))
      return f;
  return std::nullopt;
}

// ---- Value -------------------------------------------------------------------------------

Graph &Value::graph() const {
  if (!g_)
    user_error("use of an empty qkv::Value (not made by a graph)");
  return *g_;
}

const Node &Value::node() const { return graph().node(id_); }

std::string Value::describe() const { return "'" + name() + "' " + qkv::describe(dims()); }

Value Value::named(const std::string &name) const {
  user_check(!name.empty(), "named(): empty name");
  Node &n = graph().mutable_node(id_);
  if (n.op == OpKind::Input || n.op == OpKind::Param)
    user_error("named(): '" + n.name + "' is an argument; its name is how it is bound");
  n.name = name;
  return *this;
}

Expr Value::load(std::vector<Expr> idx) const {
  const Node &n = node();
  // The mod being traced names the error ("score_mod: ..."), else the expression.
  const char *mod = detail::TracingMod::current();
  std::string who = mod ? std::string(mod) + ": " : std::string("mod expression: ");
  if (static_cast<int>(idx.size()) != n.rank())
    user_error(who + describe() + " has " + std::to_string(n.rank()) +
               " dims but is indexed with " + std::to_string(idx.size()));
  std::vector<ExprPtr> ps;
  for (std::size_t i = 0; i < idx.size(); ++i) {
    if (idx[i].type() != ExprType::Int)
      user_error(who + "index " + std::to_string(i) + " of " + describe() + " is the float `" +
                 idx[i].str() +
                 "`; tensor indices must be integers (positions, integer "
                 "constants, loads from integer tensors and integer arithmetic on them)");
    ps.push_back(idx[i].ptr());
  }
  return Expr(detail::make_load(g_, id_, n.dtype, std::move(ps)));
}

// ---- Graph -------------------------------------------------------------------------------

Graph::Graph(std::string name) : name_(std::move(name)) {
  user_check(!name_.empty(), "Graph: empty name");
}

static bool is_identifier(const std::string &s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_'))
    return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '\'';
  });
}

static bool is_derived_name(const std::string &s) {
  return s.find_first_of("*+") != std::string::npos;
}

/// The checks of a new atomic dim's name and extent.
static void check_new_dim(const std::string &name, std::int64_t extent) {
  if (!is_identifier(name))
    user_error("dim name '" + name +
               "' is not an identifier (letters, digits, _ ; derived dims like H*Dh are "
               "made by ops)");
  if (extent != kDynamic && extent < 1)
    user_error("dim '" + name + "': extent must be positive or dynamic, got " +
               std::to_string(extent));
}

Dim Graph::dim(const std::string &name, std::int64_t extent) {
  check_new_dim(name, extent);
  auto it = dims_.find(name);
  if (it != dims_.end()) {
    if (it->second.extent != extent)
      user_error("dim '" + name + "' is already declared as " +
                 describe(Dim(name, it->second.extent)) + "; it cannot also be " +
                 describe(Dim(name, extent)));
    return Dim(name, extent);
  }
  dims_[name] = DimDef{name, extent, DimDef::Kind::Atomic, {}};
  return Dim(name, extent);
}

void Graph::use_dims(const std::vector<Dim> &dims, const std::string &context) {
  // Check every dim before registering any, so that an input or op that fails leaves the
  // graph's dims as they were (a stale extent would blame later, valid uses).
  std::map<std::string, std::int64_t> known;
  for (const auto &[name, def] : dims_)
    known[name] = def.extent;
  for (const Dim &d : dims) {
    auto it = known.find(d.name);
    if (it != known.end()) {
      if (it->second != d.extent)
        user_error(context + ": dim '" + d.name + "' is " + describe(Dim(d.name, it->second)) +
                   " elsewhere in graph '" + name_ + "' but " + describe(d) + " here");
      continue;
    }
    if (!is_derived_name(d.name))
      check_new_dim(d.name, d.extent);
    known[d.name] = d.extent;
  }
  for (const Dim &d : dims)
    if (!dims_.count(d.name))
      dims_[d.name] = DimDef{d.name, d.extent, DimDef::Kind::Atomic, {}};
}

void Graph::define_product(const Dim &result, const Dim &a, const Dim &b) {
  use_dims({a, b, result}, "product dim");
  if (result.name != product(a, b).name)
    return; // a user-named dim (merge_heads(x, D)): bound from its own extent
  DimDef &d = dims_[result.name];
  d.kind = DimDef::Kind::Product;
  d.parts = {a.name, b.name};
}

void Graph::define_sum(const Dim &result, const std::vector<Dim> &parts) {
  use_dims(parts, "sum dim");
  use_dims({result}, "sum dim");
  if (result.name != sum(parts).name)
    return;
  DimDef &d = dims_[result.name];
  d.kind = DimDef::Kind::Sum;
  d.parts.clear();
  for (const Dim &p : parts)
    d.parts.push_back(p.name);
}

Value Graph::add_argument(OpKind op, const std::string &name, DType dtype,
                          const std::vector<Dim> &dims) {
  const char *what = op == OpKind::Input ? "input" : op == OpKind::Param ? "param" : "constant";
  if (name.empty())
    user_error(std::string(what) + ": empty name");
  for (const Node &n : nodes_)
    if ((n.op == OpKind::Input || n.op == OpKind::Param || n.op == OpKind::Constant) &&
        n.name == name)
      user_error(std::string(what) + " '" + name + "': graph '" + name_ +
                 "' already has an input, param or constant with this name");
  use_dims(dims, std::string(what) + " '" + name + "'");
  Node n;
  n.id = static_cast<NodeId>(nodes_.size());
  n.op = op;
  n.name = name;
  n.dtype = dtype;
  n.dims = dims;
  nodes_.push_back(std::move(n));
  return Value(this, nodes_.back().id);
}

Value Graph::input(const std::string &name, DType dtype, const std::vector<Dim> &dims) {
  return add_argument(OpKind::Input, name, dtype, dims);
}

Value Graph::param(const std::string &name, DType dtype, const std::vector<Dim> &dims) {
  return add_argument(OpKind::Param, name, dtype, dims);
}

Value Graph::constant(const std::string &name, const std::vector<Dim> &dims,
                      std::vector<double> values, DType dtype) {
  std::int64_t count = 1;
  for (const Dim &d : dims) {
    if (d.is_dynamic())
      user_error("constant '" + name + "': dim " + describe(d) +
                 " is dynamic; a constant's dims must be static");
    count *= d.extent;
  }
  if (static_cast<std::int64_t>(values.size()) != count)
    user_error("constant '" + name + "' " + describe_full(dims) + " needs " +
               std::to_string(count) + " values, got " + std::to_string(values.size()));
  Value v = add_argument(OpKind::Constant, name, dtype, dims);
  nodes_[v.id()].attrs.data = std::make_shared<const std::vector<double>>(std::move(values));
  return v;
}

void Graph::output(const std::string &name, Value v) {
  user_check(!name.empty(), "output: empty name");
  user_check(v.valid() && &v.graph() == this,
             "output '" + name + "': the value is not from graph '" + name_ + "'");
  for (const auto &[n, id] : outputs_)
    if (n == name)
      user_error("output '" + name + "': graph '" + name_ + "' already has an output named so");
  outputs_.emplace_back(name, v.id());
}

const Node &Graph::node(NodeId id) const {
  if (id < 0 || id >= static_cast<NodeId>(nodes_.size()))
    internal_error("graph '" + name_ + "': no node " + std::to_string(id));
  return nodes_[id];
}

Node &Graph::mutable_node(NodeId id) {
  if (id < 0 || id >= static_cast<NodeId>(nodes_.size()))
    internal_error("graph '" + name_ + "': no node " + std::to_string(id));
  return nodes_[id];
}

std::vector<NodeId> Graph::arguments() const {
  std::vector<NodeId> out;
  for (const Node &n : nodes_)
    if (n.op == OpKind::Input || n.op == OpKind::Param)
      out.push_back(n.id);
  return out;
}

std::optional<NodeId> Graph::find_argument(const std::string &name) const {
  for (const Node &n : nodes_)
    if ((n.op == OpKind::Input || n.op == OpKind::Param) && n.name == name)
      return n.id;
  return std::nullopt;
}

std::vector<NodeId> Graph::users(NodeId id) const {
  std::vector<NodeId> out;
  for (const Node &n : nodes_)
    if (std::find(n.inputs.begin(), n.inputs.end(), id) != n.inputs.end())
      out.push_back(n.id);
  return out;
}

bool Graph::is_output(NodeId id) const {
  return std::any_of(outputs_.begin(), outputs_.end(),
                     [id](const auto &o) { return o.second == id; });
}

Value Graph::add_node(OpKind op, const std::vector<Value> &inputs, Attrs attrs, DType dtype,
                      std::vector<Dim> dims, std::string name) {
  Node n;
  n.id = static_cast<NodeId>(nodes_.size());
  n.op = op;
  for (const Value &v : inputs) {
    if (!v.valid() || &v.graph() != this)
      internal_error("add_node: input from another graph");
    n.inputs.push_back(v.id());
  }
  n.name = name.empty() ? std::string(op_name(op)) + "#" + std::to_string(n.id) : std::move(name);
  n.attrs = std::move(attrs);
  n.dtype = dtype;
  use_dims(dims, std::string(op_name(op)));
  n.dims = std::move(dims);
  nodes_.push_back(std::move(n));
  return Value(this, nodes_.back().id);
}

// ---- printing and hashing -----------------------------------------------------------------

static bool default_name(const Node &n) {
  return n.name == std::string(op_name(n.op)) + "#" + std::to_string(n.id);
}

static std::string type_str(const Node &n) {
  return std::string(dtype_name(n.dtype)) + " " + describe_full(n.dims);
}

/// How mods refer to the tensors they load: by name, or (for the hash) by id, except
/// arguments, whose names are part of what a graph computes.
static std::vector<std::string> load_names(const Graph &g, bool with_names) {
  std::vector<std::string> names;
  names.reserve(g.nodes().size());
  for (const Node &m : g.nodes())
    names.push_back(with_names || m.op == OpKind::Input || m.op == OpKind::Param ||
                            m.op == OpKind::Constant
                        ? m.name
                        : "%" + std::to_string(m.id));
  return names;
}

namespace {

/// An attribute's value as Graph::str prints it; empty when the field holds nothing.
struct PrintedValue {
  const std::vector<std::string> *names;
  AttrStyle style;
  std::string operator()(const std::vector<std::int64_t> &v) const {
    if (v.empty() || style == AttrStyle::First)
      return v.empty() ? "" : std::to_string(v[0]);
    std::string s = "[";
    for (std::size_t i = 0; i < v.size(); ++i)
      s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
  }
  std::string operator()(const std::vector<Dim> &ds) const {
    std::string s;
    for (std::size_t i = 0; i < ds.size(); ++i)
      s += (i ? ", " : "") + ds[i].name + "=" +
           (ds[i].is_static() ? std::to_string(ds[i].extent) : "?");
    return s;
  }
  std::string operator()(const std::optional<double> &v) const {
    return v ? detail::format_double(*v) : "";
  }
  std::string operator()(double v) const { return detail::format_double(v); }
  std::string operator()(std::int64_t v) const { return std::to_string(v); }
  std::string operator()(bool v) const {
    if (style == AttrStyle::TanhOrNone)
      return v ? "tanh" : "none";
    return v ? "true" : "false";
  }
  std::string operator()(FeatureMap v) const { return std::string(feature_map_name(v)); }
  std::string operator()(const ExprPtr &e) const {
    return e ? "{" + to_string(e, names) + "}" : "";
  }
  std::string operator()(const std::shared_ptr<const std::vector<double>> &d) const {
    if (!d)
      return "";
    std::string s = "[";
    for (std::size_t i = 0; i < d->size(); ++i)
      s += (i ? ", " : "") + detail::format_double((*d)[i]);
    return s + "]";
  }
};

/// ` {label = value, ...}`: the attributes the op table says the op prints.
std::string attr_str(const Node &n, const std::vector<std::string> &names) {
  std::string s;
  for (const AttrUse &use : op_info(n.op).attrs) {
    if (use.label.empty())
      break;
    std::string value;
    visit_field(n.attrs, use.field, [&](const char *, const auto &v) {
      value = PrintedValue{&names, use.style}(v);
    });
    if (!value.empty())
      s += (s.empty() ? " {" : ", ") + std::string(use.label) + " = " + value;
  }
  return s.empty() ? s : s + "}";
}

} // namespace

static std::string print_graph(const Graph &g, bool with_names) {
  // Built once, not per node: printing is linear in the graph (it keys the kernel cache).
  const std::vector<std::string> names = load_names(g, with_names);
  std::ostringstream os;
  os << "graph \"" << (with_names ? g.name() : std::string("_")) << "\" {\n";
  for (const Node &n : g.nodes()) {
    os << "  %" << n.id;
    bool arg = is_leaf(n.op);
    if (!arg && with_names && !default_name(n))
      os << " \"" << n.name << "\"";
    os << " = " << op_name(n.op);
    if (arg)
      os << " \"" << n.name << "\"";
    for (std::size_t i = 0; i < n.inputs.size(); ++i) {
      if (static_cast<int>(i) == n.num_operands())
        os << " captures";
      os << (i == 0 || static_cast<int>(i) == n.num_operands() ? " " : ", ") << "%" << n.inputs[i];
    }
    os << attr_str(n, names) << " : " << type_str(n) << "\n";
  }
  for (const auto &[name, id] : g.outputs())
    os << "  output \"" << name << "\" = %" << id << "\n";
  os << "}\n";
  return os.str();
}

std::string Graph::str() const { return print_graph(*this, true); }

namespace {

// Attrs has exactly the fields visit_fields lists: this binding fails to compile when a
// field is added (add it to visit_fields, then count it here).
static_assert(kNumAttrFields == 16, "AttrField lists Attrs' fields in visit_fields' order");
[[maybe_unused]] void attrs_has_sixteen_fields(const Attrs &a) {
  [[maybe_unused]] const auto &[f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15,
                                f16] = a;
}

struct FieldText {
  const std::vector<std::string> *names;
  std::string operator()(const std::vector<std::int64_t> &v) const {
    std::string s = "[";
    for (std::size_t i = 0; i < v.size(); ++i)
      s += (i ? "," : "") + std::to_string(v[i]);
    return s + "]";
  }
  std::string operator()(const std::vector<Dim> &v) const {
    std::string s = "[";
    for (std::size_t i = 0; i < v.size(); ++i)
      s += (i ? "," : "") + v[i].name + ":" + std::to_string(v[i].extent);
    return s + "]";
  }
  std::string operator()(const std::optional<double> &v) const {
    return v ? detail::format_double(*v) : "none";
  }
  std::string operator()(double v) const { return detail::format_double(v); }
  std::string operator()(std::int64_t v) const { return std::to_string(v); }
  std::string operator()(bool v) const { return v ? "true" : "false"; }
  std::string operator()(FeatureMap v) const { return std::string(feature_map_name(v)); }
  std::string operator()(const ExprPtr &e) const { return e ? "{" + to_string(e, names) + "}" : "none"; }
  std::string operator()(const std::shared_ptr<const std::vector<double>> &d) const {
    if (!d)
      return "none";
    std::string s = "[";
    for (std::size_t i = 0; i < d->size(); ++i)
      s += (i ? "," : "") + detail::format_double((*d)[i]);
    return s + "]";
  }
};

} // namespace

std::string attrs_key(const Attrs &a, const std::vector<std::string> *names) {
  const Attrs defaults;
  std::vector<std::string> mine, theirs;
  FieldText text{names};
  visit_fields(a, [&](const char *, const auto &v) { mine.push_back(text(v)); });
  visit_fields(defaults, [&](const char *, const auto &v) { theirs.push_back(text(v)); });
  std::string out;
  std::size_t i = 0;
  visit_fields(a, [&](const char *name, const auto &) {
    if (mine[i] != theirs[i])
      out += (out.empty() ? "" : " ") + std::string(name) + "=" + mine[i];
    ++i;
  });
  return out;
}

std::string Graph::key_text() const {
  std::vector<std::string> names;
  for (const Node &n : nodes_)
    names.push_back(n.name);
  std::string s = str();
  for (const Node &n : nodes_)
    if (std::string k = attrs_key(n.attrs, &names); !k.empty())
      s += "attrs %" + std::to_string(n.id) + " " + k + "\n";
  return s;
}

std::uint64_t Graph::hash() const {
  // FNV-1a over the canonical text (no node names, no graph name): stable across runs and
  // machines, so it can key a kernel cache on disk.
  std::string text = print_graph(*this, false);
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

void Graph::verify() const {
  std::set<std::string> arg_names;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    const Node &n = nodes_[i];
    std::string where = "graph '" + name_ + "', node %" + std::to_string(i) + " '" + n.name + "'";
    if (n.id != static_cast<NodeId>(i))
      user_error(where + ": id " + std::to_string(n.id) + " out of order");
    for (NodeId in : n.inputs)
      if (in < 0 || in >= n.id)
        user_error(where + ": input %" + std::to_string(in) +
                   " does not come before it (the graph must be a DAG in creation order)");
    for (const Dim &d : n.dims) {
      auto it = dims_.find(d.name);
      if (it == dims_.end())
        user_error(where + ": dim '" + d.name + "' is not declared in the graph");
      if (it->second.extent != d.extent)
        user_error(where + ": dim " + describe(d) + " disagrees with the graph's " +
                   describe(Dim(d.name, it->second.extent)));
    }
    switch (n.op) {
    case OpKind::Input:
    case OpKind::Param:
    case OpKind::Constant:
      if (!n.inputs.empty())
        user_error(where + ": an argument has inputs");
      if (!arg_names.insert(n.name).second)
        user_error(where + ": argument name '" + n.name + "' is used twice");
      if (n.op == OpKind::Constant) {
        std::int64_t count = 1;
        for (const Dim &d : n.dims)
          count *= d.is_static() ? d.extent : 0;
        if (!n.attrs.data || static_cast<std::int64_t>(n.attrs.data->size()) != count)
          user_error(where + ": constant data does not match its dims");
      }
      break;
    default: {
      InferredType t;
      try {
        t = infer_type(*this, n.op, n.inputs, n.attrs);
      } catch (const Error &e) {
        user_error(where + ": " + e.what());
      }
      if (t.dtype != n.dtype || t.dims != n.dims)
        user_error(where + ": stored type " + type_str(n) + " is not what " +
                   std::string(op_name(n.op)) + " gives, " + std::string(dtype_name(t.dtype)) +
                   " " + describe_full(t.dims));
    }
    }
  }
  std::set<std::string> out_names;
  for (const auto &[name, id] : outputs_) {
    if (id < 0 || id >= static_cast<NodeId>(nodes_.size()))
      user_error("graph '" + name_ + "': output '" + name + "' refers to no node");
    if (!out_names.insert(name).second)
      user_error("graph '" + name_ + "': output name '" + name + "' is used twice");
  }
  if (outputs_.empty())
    user_error("graph '" + name_ + "' has no outputs (call g.output(name, value))");
}

// ---- dim binding -----------------------------------------------------------------------------

static std::string shape_str(const Shape &s) {
  std::string r = "[";
  for (std::size_t i = 0; i < s.size(); ++i)
    r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

// Derived dims (H*Dh, A+B): computes each from its parts, or infers one missing part
// from the whole. `source` names where each known extent came from, for messages.
static void derive_dims(const Graph &g, DimBindings &b,
                        std::map<std::string, std::string> &source) {
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto &[name, def] : g.dim_defs()) {
      if (def.kind == DimDef::Kind::Atomic)
        continue;
      bool all = true;
      std::int64_t v = def.kind == DimDef::Kind::Product ? 1 : 0;
      int missing = -1, nmissing = 0;
      for (std::size_t i = 0; i < def.parts.size(); ++i) {
        auto it = b.find(def.parts[i]);
        if (it == b.end()) {
          all = false;
          missing = static_cast<int>(i);
          ++nmissing;
        } else {
          v = def.kind == DimDef::Kind::Product ? v * it->second : v + it->second;
        }
      }
      auto self = b.find(name);
      if (all) {
        if (self == b.end()) {
          b[name] = v;
          changed = true;
        } else if (self->second != v) {
          user_error("dim '" + name + "' is " + std::to_string(self->second) + " in '" +
                     source[name] + "' but its parts make " + std::to_string(v));
        }
      } else if (nmissing == 1 && self != b.end()) {
        std::int64_t rest = self->second;
        std::int64_t part;
        if (def.kind == DimDef::Kind::Product) {
          if (v == 0 || rest % v != 0)
            user_error("dim '" + name + "' is " + std::to_string(rest) + " in '" + source[name] +
                       "', which is not a multiple of " + std::to_string(v));
          part = rest / v;
        } else {
          part = rest - v;
          if (part < 0)
            user_error("dim '" + name + "' is " + std::to_string(rest) + " in '" + source[name] +
                       "', less than its known parts");
        }
        b[def.parts[missing]] = part;
        source[def.parts[missing]] = source[name];
        changed = true;
      }
    }
  }
}

DimBindings complete_dims(const Graph &g, DimBindings b) {
  auto dynamic_list = [&] {
    std::string list;
    for (const auto &[name, def] : g.dim_defs())
      if (def.extent == kDynamic && def.kind == DimDef::Kind::Atomic)
        list += (list.empty() ? "" : ", ") + name;
    return list.empty() ? std::string("none") : list;
  };
  for (const auto &[name, v] : b) {
    auto it = g.dim_defs().find(name);
    if (it == g.dim_defs().end())
      user_error("graph '" + g.name() + "' has no dim '" + name +
                 "' (its dynamic dims: " + dynamic_list() + ")");
    if (it->second.extent != kDynamic && it->second.extent != v)
      user_error("dim '" + name + "' of graph '" + g.name() + "' is static, " +
                 std::to_string(it->second.extent) + "; it cannot be bound to " +
                 std::to_string(v) + " (the graph's dynamic dims: " + dynamic_list() + ")");
  }
  std::map<std::string, std::string> source;
  for (const auto &[name, def] : g.dim_defs())
    if (def.extent != kDynamic) {
      b[name] = def.extent;
      source[name] = "its declaration";
    }
  for (const auto &[name, v] : b)
    if (!source.count(name))
      source[name] = "the given extents";
  derive_dims(g, b, source);
  return b;
}

DimBindings bind_dims(const Graph &g, const std::map<std::string, std::pair<DType, Shape>> &args) {
  DimBindings b;
  std::map<std::string, std::string> source; // dim -> the argument that bound it
  for (const auto &[name, def] : g.dim_defs())
    if (def.extent != kDynamic) {
      b[name] = def.extent;
      source[name] = "its declaration";
    }

  std::vector<NodeId> arg_ids = g.arguments();
  for (const auto &[name, ts] : args) {
    if (!g.find_argument(name)) {
      std::string list;
      for (NodeId id : arg_ids)
        list += (list.empty() ? "" : ", ") + g.node(id).name;
      user_error("unknown input '" + name + "': graph '" + g.name() + "' takes " +
                 (list.empty() ? std::string("no inputs") : list));
    }
  }
  for (NodeId id : arg_ids) {
    const Node &n = g.node(id);
    const char *what = n.op == OpKind::Input ? "input" : "param";
    auto it = args.find(n.name);
    if (it == args.end())
      user_error("missing " + std::string(what) + " '" + n.name +
                 "': " + std::string(dtype_name(n.dtype)) + " " + describe_full(n.dims));
    const auto &[dtype, shape] = it->second;
    if (dtype != n.dtype)
      user_error(std::string(what) + " '" + n.name + "' must be " +
                 std::string(dtype_name(n.dtype)) + ", got " + std::string(dtype_name(dtype)));
    if (shape.size() != n.dims.size())
      user_error(std::string(what) + " '" + n.name + "' has dims " + describe_full(n.dims) +
                 ", got a tensor of shape " + shape_str(shape));
    for (std::size_t i = 0; i < shape.size(); ++i) {
      const Dim &d = n.dims[i];
      if (shape[i] < 0)
        user_error(std::string(what) + " '" + n.name + "': negative extent in shape " +
                   shape_str(shape));
      auto bit = b.find(d.name);
      if (bit == b.end()) {
        b[d.name] = shape[i];
        source[d.name] = n.name;
      } else if (bit->second != shape[i]) {
        if (d.is_static())
          user_error(std::string(what) + " '" + n.name + "': dim '" + d.name + "' must be " +
                     std::to_string(d.extent) + ", got " + std::to_string(shape[i]) + " (shape " +
                     shape_str(shape) + ")");
        user_error("dim '" + d.name + "' is " + std::to_string(bit->second) + " in '" +
                   source[d.name] + "' but " + std::to_string(shape[i]) + " in '" + n.name +
                   "' (shape " + shape_str(shape) + ")");
      }
    }
  }
  derive_dims(g, b, source);
  for (const Node &n : g.nodes())
    for (const Dim &d : n.dims)
      if (!b.count(d.name))
        user_error("dim '" + d.name + "' of '" + n.name +
                   "' is not bound: no input has it, and it is dynamic");
  return b;
}

Shape resolve(const std::vector<Dim> &dims, const DimBindings &b) {
  Shape s;
  for (const Dim &d : dims) {
    if (d.is_static()) {
      s.push_back(d.extent);
      continue;
    }
    auto it = b.find(d.name);
    if (it == b.end())
      user_error("dim '" + d.name + "' is not bound");
    s.push_back(it->second);
  }
  return s;
}

} // namespace qkv
