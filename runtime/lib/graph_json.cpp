// Graph <-> JSON (nlohmann-json): every attribute through visit_fields, mods as trees.
#include <qkv/runtime/graph_json.hpp>

#include <cmath>
#include <limits>
#include <utility>

#include <nlohmann/json.hpp>

#include <qkv/dsl/error.hpp>

namespace qkv {

using json = nlohmann::json;

namespace {

constexpr int kGraphJsonVersion = 1;

[[noreturn]] void malformed(const std::string &where, const std::string &what) {
  user_error("graph JSON: " + where + ": " + what);
}

// ---- numbers: JSON has no infinities or NaN ----

json number(double v) {
  if (std::isnan(v))
    return "nan";
  if (std::isinf(v))
    return v > 0 ? "inf" : "-inf";
  return v;
}

double read_number(const json &j, const std::string &where) {
  if (j.is_number())
    return j.get<double>();
  if (j.is_string()) {
    const std::string &s = j.get_ref<const std::string &>();
    if (s == "inf")
      return std::numeric_limits<double>::infinity();
    if (s == "-inf")
      return -std::numeric_limits<double>::infinity();
    if (s == "nan")
      return std::numeric_limits<double>::quiet_NaN();
  }
  malformed(where, "expected a number, got " + j.dump());
}

std::int64_t read_int(const json &j, const std::string &where) {
  if (!j.is_number_integer())
    malformed(where, "expected an integer, got " + j.dump());
  return j.get<std::int64_t>();
}

const std::string &read_string(const json &j, const std::string &where) {
  if (!j.is_string())
    malformed(where, "expected a string, got " + j.dump());
  return j.get_ref<const std::string &>();
}

const json &field(const json &j, const char *name, const std::string &where) {
  if (!j.is_object())
    malformed(where, "expected an object, got " + j.dump());
  auto it = j.find(name);
  if (it == j.end())
    malformed(where, std::string("no field '") + name + "'");
  return *it;
}

const json &array(const json &j, const std::string &where) {
  if (!j.is_array())
    malformed(where, "expected an array, got " + j.dump());
  return j;
}

// ---- mod expressions ----

/// Each ExprOp's name in the JSON form (expr_op_name spells Neg and Sub both "-").
constexpr std::pair<ExprOp, const char *> kExprOps[] = {
    {ExprOp::IndexB, "b"},       {ExprOp::IndexH, "h"},      {ExprOp::IndexQ, "q"},
    {ExprOp::IndexKV, "kv"},     {ExprOp::LenQ, "len_q"},    {ExprOp::LenKV, "len_kv"},
    {ExprOp::Score, "score"},    {ExprOp::ConstInt, "int"},  {ExprOp::ConstFloat, "float"},
    {ExprOp::ConstBool, "bool"}, {ExprOp::Neg, "neg"},       {ExprOp::Not, "not"},
    {ExprOp::Exp, "exp"},        {ExprOp::Log, "log"},       {ExprOp::Tanh, "tanh"},
    {ExprOp::Abs, "abs"},        {ExprOp::Sqrt, "sqrt"},     {ExprOp::ToFloat, "to_float"},
    {ExprOp::Add, "add"},        {ExprOp::Sub, "sub"},       {ExprOp::Mul, "mul"},
    {ExprOp::Div, "div"},        {ExprOp::Mod, "mod"},       {ExprOp::Min, "min"},
    {ExprOp::Max, "max"},        {ExprOp::Pow, "pow"},       {ExprOp::Lt, "lt"},
    {ExprOp::Le, "le"},          {ExprOp::Gt, "gt"},         {ExprOp::Ge, "ge"},
    {ExprOp::Eq, "eq"},          {ExprOp::Ne, "ne"},         {ExprOp::And, "and"},
    {ExprOp::Or, "or"},          {ExprOp::Select, "select"}, {ExprOp::Load, "load"},
};
static_assert(std::size(kExprOps) == static_cast<std::size_t>(ExprOp::Load) + 1,
              "every ExprOp needs its JSON name");

const char *expr_json_name(ExprOp op) {
  for (const auto &[o, name] : kExprOps)
    if (o == op)
      return name;
  internal_error("graph JSON: an ExprOp without a name");
}

json encode_expr(const ExprPtr &e) {
  json j = {{"op", expr_json_name(e->op)}};
  if (e->op == ExprOp::ConstInt || e->op == ExprOp::ConstBool)
    j["value"] = e->ival;
  if (e->op == ExprOp::ConstFloat)
    j["value"] = number(e->fval);
  if (e->op == ExprOp::Load)
    j["tensor"] = e->tensor;
  if (!e->args.empty()) {
    json args = json::array();
    for (const ExprPtr &a : e->args)
      args.push_back(encode_expr(a));
    j["args"] = std::move(args);
  }
  return j;
}

ExprPtr decode_expr(const json &j, Graph &g, const std::string &where);

std::vector<ExprPtr> decode_args(const json &j, Graph &g, const std::string &where,
                                 std::size_t count) {
  std::vector<ExprPtr> args;
  if (j.is_object() && j.contains("args"))
    for (const json &a : array(j["args"], where + ".args"))
      args.push_back(decode_expr(a, g, where + ".args[" + std::to_string(args.size()) + "]"));
  if (count != SIZE_MAX && args.size() != count)
    malformed(where, "expected " + std::to_string(count) + " arguments, got " +
                         std::to_string(args.size()));
  return args;
}

/// A load of node `tensor`, which must be an earlier node of g.
ExprPtr decode_load(const json &j, Graph &g, const std::string &where) {
  std::int64_t tensor = read_int(field(j, "tensor", where), where + ".tensor");
  if (tensor < 0 || tensor >= static_cast<std::int64_t>(g.nodes().size()))
    malformed(where, "a load from node " + std::to_string(tensor) + ", which is not defined yet");
  DType dtype = g.node(static_cast<NodeId>(tensor)).dtype;
  return detail::make_load(&g, static_cast<std::int32_t>(tensor), dtype,
                           decode_args(j, g, where, SIZE_MAX));
}

ExprPtr decode_expr(const json &j, Graph &g, const std::string &where) {
  const std::string &name = read_string(field(j, "op", where), where + ".op");
  const auto *it = std::find_if(std::begin(kExprOps), std::end(kExprOps),
                                [&](const auto &p) { return name == p.second; });
  if (it == std::end(kExprOps))
    malformed(where, "unknown mod operation '" + name + "'");
  ExprOp op = it->first;
  switch (op) {
  case ExprOp::ConstInt: return detail::make_int(read_int(field(j, "value", where), where));
  case ExprOp::ConstBool: return detail::make_bool(read_int(field(j, "value", where), where) != 0);
  case ExprOp::ConstFloat: return detail::make_float(read_number(field(j, "value", where), where));
  case ExprOp::Load: return decode_load(j, g, where);
  case ExprOp::Select: {
    auto a = decode_args(j, g, where, 3);
    return detail::make_select(a[0], a[1], a[2]);
  }
  default: break;
  }
  if (op <= ExprOp::Score)
    return decode_args(j, g, where, 0), detail::make_leaf(op);
  if (op <= ExprOp::ToFloat)
    return detail::make_unary(op, decode_args(j, g, where, 1)[0]);
  auto a = decode_args(j, g, where, 2);
  return detail::make_binary(op, a[0], a[1]);
}

// ---- dims and attributes ----

json encode_dim(const Dim &d) {
  return json::array({d.name, d.is_dynamic() ? json(nullptr) : json(d.extent)});
}

Dim decode_dim(const json &j, const std::string &where) {
  if (!j.is_array() || j.size() != 2)
    malformed(where, "a dim is [name, extent or null], got " + j.dump());
  return Dim(read_string(j[0], where), j[1].is_null() ? kDynamic : read_int(j[1], where));
}

std::vector<Dim> decode_dims(const json &j, const std::string &where) {
  std::vector<Dim> out;
  for (const json &d : array(j, where))
    out.push_back(decode_dim(d, where + "[" + std::to_string(out.size()) + "]"));
  return out;
}

json encode(const std::vector<std::int64_t> &v) { return v; }
json encode(const std::vector<Dim> &v) {
  json out = json::array();
  for (const Dim &d : v)
    out.push_back(encode_dim(d));
  return out;
}
json encode(const std::optional<double> &v) { return number(*v); }
json encode(double v) { return number(v); }
json encode(std::int64_t v) { return v; }
json encode(bool v) { return v; }
json encode(FeatureMap v) { return std::string(feature_map_name(v)); }
json encode(const ExprPtr &e) { return encode_expr(e); }
json encode(const std::shared_ptr<const std::vector<double>> &data) {
  json out = json::array();
  for (double v : *data)
    out.push_back(number(v));
  return out;
}

/// A field's JSON, or null where it is unset (no mod, no data, no scale).
template <class T> json encode_set(const T &v) {
  if constexpr (std::is_same_v<T, ExprPtr> ||
                std::is_same_v<T, std::shared_ptr<const std::vector<double>>> ||
                std::is_same_v<T, std::optional<double>>)
    if (!v)
      return nullptr;
  return encode(v);
}

/// The fields that differ from a default Attrs (as attrs_key keys them).
json encode_attrs(const Attrs &a) {
  static const json defaults = [] {
    json d = json::object();
    const Attrs none;
    visit_fields(none, [&](const char *name, const auto &v) { d[name] = encode_set(v); });
    return d;
  }();
  json out = json::object();
  visit_fields(a, [&](const char *name, const auto &v) {
    json e = encode_set(v);
    if (!e.is_null() && e != defaults[name])
      out[name] = std::move(e);
  });
  return out;
}

void decode(const json &j, std::vector<std::int64_t> &v, Graph &, const std::string &where) {
  v.clear();
  for (const json &x : array(j, where))
    v.push_back(read_int(x, where));
}
void decode(const json &j, std::vector<Dim> &v, Graph &, const std::string &where) {
  v = decode_dims(j, where);
}
void decode(const json &j, std::optional<double> &v, Graph &, const std::string &where) {
  v = read_number(j, where);
}
void decode(const json &j, double &v, Graph &, const std::string &where) {
  v = read_number(j, where);
}
void decode(const json &j, std::int64_t &v, Graph &, const std::string &where) {
  v = read_int(j, where);
}
void decode(const json &j, bool &v, Graph &, const std::string &where) {
  if (!j.is_boolean())
    malformed(where, "expected true or false, got " + j.dump());
  v = j.get<bool>();
}
void decode(const json &j, FeatureMap &v, Graph &, const std::string &where) {
  const std::string &s = read_string(j, where);
  std::optional<FeatureMap> f = parse_feature_map(s);
  if (!f)
    malformed(where, "unknown feature map '" + s + "'");
  v = *f;
}
void decode(const json &j, ExprPtr &v, Graph &g, const std::string &where) {
  v = decode_expr(j, g, where);
}
void decode(const json &j, std::shared_ptr<const std::vector<double>> &v, Graph &,
            const std::string &where) {
  std::vector<double> data;
  for (const json &x : array(j, where))
    data.push_back(read_number(x, where));
  v = std::make_shared<const std::vector<double>>(std::move(data));
}

Attrs decode_attrs(const json &j, Graph &g, const std::string &where) {
  if (!j.is_object())
    malformed(where, "expected an object, got " + j.dump());
  Attrs a;
  std::size_t known = 0;
  visit_fields(a, [&](const char *name, auto &v) {
    auto it = j.find(name);
    if (it == j.end())
      return;
    ++known;
    decode(*it, v, g, where + "." + name);
  });
  if (known != j.size())
    for (const auto &[name, value] : j.items()) {
      bool found = false;
      visit_fields(a, [&](const char *n, auto &) { found = found || name == n; });
      if (!found)
        malformed(where, "unknown attribute '" + name + "'");
    }
  return a;
}

} // namespace

namespace {

json encode_dim_defs(const Graph &g) {
  json out = json::array();
  for (const auto &[name, def] : g.dim_defs()) {
    json d = {{"name", name},
              {"extent", def.extent == kDynamic ? json(nullptr) : json(def.extent)}};
    if (def.kind != DimDef::Kind::Atomic) {
      d["kind"] = def.kind == DimDef::Kind::Product ? "product" : "sum";
      d["parts"] = def.parts;
    }
    out.push_back(std::move(d));
  }
  return out;
}

json encode_node(const Node &n) {
  json dims = json::array();
  for (const Dim &d : n.dims)
    dims.push_back(encode_dim(d));
  return {{"op", std::string(op_name(n.op))},
          {"name", n.name},
          {"inputs", n.inputs},
          {"dtype", std::string(dtype_name(n.dtype))},
          {"dims", std::move(dims)},
          {"attrs", encode_attrs(n.attrs)}};
}

/// Declares every dim the graph had, atomic ones first, then each product or sum once
/// its parts are known (in as many rounds as they nest).
void decode_dim_defs(const json &j, Graph &g) {
  std::map<std::string, std::int64_t> extent;
  std::vector<const json *> derived;
  for (const json &d : array(j, "dims")) {
    std::string where = "dims[" + d.value("name", std::string("?")) + "]";
    const std::string &name = read_string(field(d, "name", where), where + ".name");
    const json &e = field(d, "extent", where);
    extent[name] = e.is_null() ? kDynamic : read_int(e, where + ".extent");
    if (d.contains("kind"))
      derived.push_back(&d);
    else if (name.find_first_of("*+") == std::string::npos)
      g.dim(name, extent[name]);
  }
  auto dim_of = [&](const std::string &name, const std::string &where) {
    if (!extent.count(name))
      malformed(where, "dim '" + name + "' is not declared");
    return Dim(name, extent[name]);
  };
  for (const json *d : derived) {
    std::string where = "dims[" + (*d)["name"].get<std::string>() + "]";
    Dim result = dim_of((*d)["name"].get<std::string>(), where);
    const std::string &kind = read_string((*d)["kind"], where + ".kind");
    std::vector<Dim> parts;
    for (const json &p : array(field(*d, "parts", where), where + ".parts"))
      parts.push_back(dim_of(read_string(p, where + ".parts"), where));
    if (kind == "product" && parts.size() == 2)
      g.define_product(result, parts[0], parts[1]);
    else if (kind == "sum" && !parts.empty())
      g.define_sum(result, parts);
    else
      malformed(where,
                "a dim of kind '" + kind + "' with " + std::to_string(parts.size()) + " parts");
  }
}

std::vector<Value> decode_inputs(const json &j, Graph &g, const std::string &where) {
  std::vector<Value> out;
  for (const json &i : array(j, where)) {
    std::int64_t id = read_int(i, where);
    if (id < 0 || id >= static_cast<std::int64_t>(g.nodes().size()))
      malformed(where, "input " + std::to_string(id) + " is not an earlier node");
    out.push_back(g.value(static_cast<NodeId>(id)));
  }
  return out;
}

void decode_node(const json &n, Graph &g) {
  std::string where = "nodes[" + std::to_string(g.nodes().size()) + "]";
  const std::string &op_text = read_string(field(n, "op", where), where + ".op");
  std::optional<OpKind> op = parse_op_name(op_text);
  if (!op)
    malformed(where, "unknown op '" + op_text + "'");
  const std::string &name = read_string(field(n, "name", where), where + ".name");
  DType dtype = parse_dtype(read_string(field(n, "dtype", where), where + ".dtype"));
  std::vector<Dim> dims = decode_dims(field(n, "dims", where), where + ".dims");
  std::vector<Value> inputs = decode_inputs(field(n, "inputs", where), g, where + ".inputs");
  Attrs attrs = decode_attrs(field(n, "attrs", where), g, where + ".attrs");
  bool leaf = *op == OpKind::Input || *op == OpKind::Param || *op == OpKind::Constant;
  if (leaf && !inputs.empty())
    malformed(where, "a " + op_text + " takes no inputs");
  if (*op == OpKind::Input)
    g.input(name, dtype, dims);
  else if (*op == OpKind::Param)
    g.param(name, dtype, dims);
  else if (*op == OpKind::Constant)
    g.constant(name, dims, attrs.data ? *attrs.data : std::vector<double>{}, dtype);
  else
    g.add_node(*op, inputs, std::move(attrs), dtype, std::move(dims), name);
}

/// graph_from_json, nlohmann's own exceptions let through.
Graph read_graph(std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    malformed("the text", "not valid JSON");
  if (!j.is_object() || j.value("format", std::string()) != "qkv-graph")
    malformed("the text", "not a qkv graph (no \"format\": \"qkv-graph\")");
  if (j.value("version", -1) != kGraphJsonVersion)
    malformed("version", "this qkv reads graph JSON version " + std::to_string(kGraphJsonVersion) +
                             ", the text is version " + j["version"].dump());
  Graph g(read_string(field(j, "name", "the graph"), "name"));
  decode_dim_defs(field(j, "dims", "the graph"), g);
  for (const json &n : array(field(j, "nodes", "the graph"), "nodes"))
    decode_node(n, g);
  for (const json &o : array(field(j, "outputs", "the graph"), "outputs")) {
    if (!o.is_array() || o.size() != 2)
      malformed("outputs", "an output is [name, node], got " + o.dump());
    std::vector<Value> node = decode_inputs(json::array({o[1]}), g, "outputs");
    g.output(read_string(o[0], "outputs"), node[0]);
  }
  g.verify();
  return g;
}

} // namespace

std::string graph_to_json(const Graph &g) {
  json nodes = json::array();
  for (const Node &n : g.nodes())
    nodes.push_back(encode_node(n));
  json outputs = json::array();
  for (const auto &[name, id] : g.outputs())
    outputs.push_back(json::array({name, id}));
  json j = {{"format", "qkv-graph"}, {"version", kGraphJsonVersion},
            {"name", g.name()},      {"dims", encode_dim_defs(g)},
            {"nodes", nodes},        {"outputs", outputs}};
  return j.dump(1);
}

Graph graph_from_json(std::string_view text) {
  try {
    return read_graph(text);
  } catch (const json::exception &e) {
    malformed("the text", e.what());
  }
}

} // namespace qkv
