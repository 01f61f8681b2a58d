// Op builders: each checks its arguments, then adds a node whose type infer_type gives
// (the op table's shape rule, dsl/lib/op_table.cpp). Every message names the op, the
// user's tensors and the dims, in the form `'Dh'(64)`.
#include <qkv/dsl/infer.hpp>
#include <qkv/dsl/shape_rules.hpp>

#include "op_checks.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

namespace qkv {

namespace {

using detail::q;

Graph &graph_of(const char *op, std::initializer_list<Value> vs) {
  Graph *g = nullptr;
  for (const Value &v : vs) {
    if (!v.valid())
      user_error(std::string(op) + ": an argument is an empty Value (not made by a graph)");
    if (g && &v.graph() != g)
      user_error(std::string(op) + ": arguments come from different graphs ('" + v.name() +
                 "' is from graph '" + v.graph().name() + "', not '" + g->name() + "')");
    g = &v.graph();
  }
  return *g;
}

Value build(OpKind op, std::vector<Value> inputs, Attrs attrs) {
  Graph &g = inputs.front().graph();
  std::vector<NodeId> ids;
  for (const Value &v : inputs)
    ids.push_back(v.id());
  InferredType t = infer_type(g, op, ids, attrs);
  return g.add_node(op, inputs, std::move(attrs), t.dtype, std::move(t.dims));
}

Value unary(OpKind op, Value x, Attrs a = {}) {
  graph_of(op_name(op).data(), {x});
  return build(op, {x}, std::move(a));
}

Value binary(OpKind op, Value a, Value b) {
  graph_of(op_name(op).data(), {a, b});
  return build(op, {a, b}, {});
}

/// Appends the tensors a mod loads to `inputs` (once each) after checking they belong
/// to the op's graph.
void add_captures(const char *op, Graph &g, const ExprPtr &e, std::vector<Value> &inputs,
                  NodeId before = -1) {
  std::vector<const ExprNode *> stack{e.get()};
  while (!stack.empty()) {
    const ExprNode *n = stack.back();
    stack.pop_back();
    if (n->op == ExprOp::Load && n->graph != &g)
      user_error(std::string(op) + ": a mod loads from a tensor of another graph");
    for (const auto &a : n->args)
      stack.push_back(a.get());
  }
  for (NodeId id : loaded_tensors(e)) {
    Value v(&g, id);
    if (before >= 0 && id >= before)
      user_error(std::string(op) + ": a mod loads " + v.describe() +
                 ", which was made after the op; make captured tensors first");
    if (std::find(inputs.begin(), inputs.end(), v) == inputs.end())
      inputs.push_back(v);
  }
}

} // namespace

Value matmul(Value a, Value b) { return binary(OpKind::MatMul, a, b); }

Value linear(Value x, Value w) {
  graph_of("linear", {x, w});
  return build(OpKind::Linear, {x, w}, {});
}

Value linear(Value x, Value w, Value bias) {
  graph_of("linear", {x, w, bias});
  Attrs a;
  a.has_bias = true;
  return build(OpKind::Linear, {x, w, bias}, a);
}

Value transpose(Value x, std::int64_t axis_a, std::int64_t axis_b) {
  Attrs a;
  a.axes = {axis_a, axis_b};
  return unary(OpKind::Transpose, x, a);
}

static std::int64_t axis_of(Value x, const std::string &dim, const char *op) {
  graph_of(op, {x});
  int found = -1;
  for (int i = 0; i < x.rank(); ++i)
    if (x.dims()[i].name == dim) {
      if (found >= 0)
        user_error(std::string(op) + ": dim '" + dim + "' appears twice in " + x.describe() +
                   "; pass an axis number instead");
      found = i;
    }
  if (found < 0)
    user_error(std::string(op) + ": " + x.describe() + " has no dim '" + dim + "'");
  return found;
}

Value transpose(Value x, const std::string &da, const std::string &db) {
  return transpose(x, axis_of(x, da, "transpose"), axis_of(x, db, "transpose"));
}

Value scale(Value x, double factor) {
  Attrs a;
  a.scale = factor;
  return unary(OpKind::Scale, x, a);
}

#define QKV_DEFINE_BINARY(kind, builder, bound, summary)                                       \
  Value builder(Value a, Value b) { return binary(OpKind::kind, a, b); }
QKV_BROADCAST_BINARY(QKV_DEFINE_BINARY)
#undef QKV_DEFINE_BINARY

Value residual(Value x, Value y) {
  graph_of("residual", {x, y});
  auto views = [](const Value &v) {
    std::vector<shape::DimView> d;
    for (const Dim &e : v.dims())
      d.push_back(detail::view_of(e));
    return d;
  };
  std::vector<shape::DimView> dx = views(x), dy = views(y);
  shape::TensorView in[] = {{x.dtype(), dx}, {y.dtype(), dy}};
  if (shape::same_two(in).broken == shape::Rule::same_dims) // the rest is add's
    user_error("residual: " + x.describe() + " and " + y.describe() +
               " must have exactly the same dims");
  return add(x, y);
}

Value softmax(Value x, std::int64_t axis) {
  Attrs a;
  a.axes = {axis};
  return unary(OpKind::Softmax, x, a);
}

Value softmax(Value x, const std::string &dim) { return softmax(x, axis_of(x, dim, "softmax")); }

Value split_heads(Value x, const Dim &heads, const Dim &head_dim) {
  Graph &g = graph_of("split_heads", {x});
  user_check(heads.is_static() && heads.extent >= 1,
             "split_heads: the heads dim " + describe(heads) + " must be static and positive");
  // No g.use_dims({heads, head_dim}) here: add_node registers the result's dims (which
  // hold both) only once the shape rule passed, so a failed split leaves no stale dims.
  Attrs a;
  a.dims = {heads, head_dim};
  Value out = build(OpKind::SplitHeads, {x}, a);
  if (x.dims().back().name == product(heads, head_dim).name)
    g.define_product(x.dims().back(), heads, head_dim);
  return out;
}

Value merge_heads(Value x) {
  Graph &g = graph_of("merge_heads", {x});
  Value out = build(OpKind::MergeHeads, {x}, {});
  int r = x.rank();
  g.define_product(out.dims().back(), x.dims()[r - 3], x.dims()[r - 1]);
  return out;
}

Value merge_heads(Value x, const Dim &out_dim) {
  graph_of("merge_heads", {x});
  Attrs a;
  a.dims = {out_dim};
  return build(OpKind::MergeHeads, {x}, a);
}

Value concat(const std::vector<Value> &xs, std::int64_t axis) {
  user_check(!xs.empty(), "concat: needs at least one tensor");
  for (const Value &v : xs)
    graph_of("concat", {xs.front(), v});
  Attrs a;
  a.axes = {axis};
  Value out = build(OpKind::Concat, xs, a);
  int ax = normalize_axis(axis, xs.front().rank(), "concat");
  std::vector<Dim> parts;
  for (const Value &v : xs)
    parts.push_back(v.dims()[ax]);
  if (parts.size() > 1)
    xs.front().graph().define_sum(out.dims()[ax], parts);
  return out;
}

Value concat(const std::vector<Value> &xs, std::int64_t axis, const Dim &out_dim) {
  user_check(!xs.empty(), "concat: needs at least one tensor");
  for (const Value &v : xs)
    graph_of("concat", {xs.front(), v});
  Attrs a;
  a.axes = {axis};
  a.dims = {out_dim};
  return build(OpKind::Concat, xs, a);
}

Value mask(Value scores, const MaskFn &m) {
  Graph &g = graph_of("mask", {scores});
  user_check(m.expr != nullptr, "mask: empty mask_mod");
  std::vector<Value> inputs{scores};
  add_captures("mask", g, m.expr, inputs);
  Attrs a;
  a.mask = m.expr;
  return build(OpKind::Mask, inputs, a);
}

Value score_mod(Value scores, const ScoreFn &s) {
  Graph &g = graph_of("score_mod", {scores});
  user_check(s.expr != nullptr, "score_mod: empty score_mod");
  std::vector<Value> inputs{scores};
  add_captures("score_mod", g, s.expr, inputs);
  Attrs a;
  a.score = s.expr;
  return build(OpKind::ScoreMod, inputs, a);
}

Value sinusoidal_pe(Value x, double base, std::int64_t offset) {
  Attrs a;
  a.base = base;
  a.offset = offset;
  return unary(OpKind::SinusoidalPE, x, a);
}

Value rope(Value x, RopeOptions opts) {
  Attrs a;
  a.base = opts.base;
  a.interleaved = opts.interleaved;
  a.offset = opts.offset;
  return unary(OpKind::Rope, x, a);
}

Value rope(Value x, Value positions, RopeOptions opts) {
  graph_of("rope", {x, positions});
  Attrs a;
  a.base = opts.base;
  a.interleaved = opts.interleaved;
  a.offset = opts.offset; // the shape rule refuses an offset beside positions
  return build(OpKind::Rope, {x, positions}, a);
}

Value cache_view(Value past, Value lengths, Value fresh) {
  Graph &g = graph_of("cache_view", {past, lengths, fresh});
  Value out = build(OpKind::CacheView, {past, lengths, fresh}, {});
  g.define_sum(out.dims()[2], {past.dims()[2], fresh.dims()[2]});
  return out;
}

Value paged_cache_view(Value pool, Value table, Value lengths, Value fresh) {
  Graph &g = graph_of("paged_cache_view", {pool, table, lengths, fresh});
  Value out = build(OpKind::PagedCacheView, {pool, table, lengths, fresh}, {});
  Dim rows = product(table.dims()[1], pool.dims()[2]);
  g.define_product(rows, table.dims()[1], pool.dims()[2]);
  g.define_sum(out.dims()[2], {rows, fresh.dims()[2]});
  return out;
}

MaskFn cache_mask(Value lengths) {
  return mask_fn([lengths](Expr b, Expr, Expr q, Expr kv) { return kv <= lengths[b] + q; });
}

Value layer_norm(Value x, double eps) {
  Attrs a;
  a.eps = eps;
  return unary(OpKind::LayerNorm, x, a);
}

Value layer_norm(Value x, Value gamma, Value beta, double eps) {
  graph_of("layer_norm", {x, gamma, beta});
  Attrs a;
  a.eps = eps;
  a.has_gamma = a.has_beta = true;
  return build(OpKind::LayerNorm, {x, gamma, beta}, a);
}

Value rms_norm(Value x, double eps) {
  Attrs a;
  a.eps = eps;
  return unary(OpKind::RmsNorm, x, a);
}

Value rms_norm(Value x, Value gamma, double eps) {
  graph_of("rms_norm", {x, gamma});
  Attrs a;
  a.eps = eps;
  a.has_gamma = true;
  return build(OpKind::RmsNorm, {x, gamma}, a);
}

Value gelu(Value x, bool approximate) {
  Attrs a;
  a.approximate = approximate;
  return unary(OpKind::Gelu, x, a);
}

#define QKV_DEFINE_ACTIVATION(kind, builder, bound, summary)                                   \
  Value builder(Value x) { return unary(OpKind::kind, x); }
QKV_PLAIN_ACTIVATIONS(QKV_DEFINE_ACTIVATION)
#undef QKV_DEFINE_ACTIVATION

#define QKV_DEFINE_SCALAR_ACTIVATION(kind, builder, attribute, default_value, range, bound,        \
                                     summary)                                                      \
  Value builder(Value x, double attribute) {                                                       \
    Attrs a;                                                                                       \
    a.alpha = attribute;                                                                           \
    return unary(OpKind::kind, x, a);                                                              \
  }
QKV_SCALAR_ACTIVATIONS(QKV_DEFINE_SCALAR_ACTIVATION)
#undef QKV_DEFINE_SCALAR_ACTIVATION

#define QKV_DEFINE_PAIR(kind, builder, a, b, rule, bound, summary)                                 \
  Value builder(Value a, Value b) { return binary(OpKind::kind, a, b); }
QKV_TENSOR_PAIR_OPS(QKV_DEFINE_PAIR)
#undef QKV_DEFINE_PAIR
Value embedding(Value ids, Value table) { return binary(OpKind::Embedding, ids, table); }

Value linear_attention(Value q, Value k, Value v, FeatureMap phi) {
  graph_of("linear_attention", {q, k, v});
  Attrs a;
  a.feature_map = phi;
  return build(OpKind::LinearAttention, {q, k, v}, a);
}

Attention attention(Value q, Value k, Value v) {
  graph_of("attention", {q, k, v});
  return Attention(build(OpKind::Attention, {q, k, v}, {}));
}

Value Attention::lse() const { return unary(OpKind::AttentionLse, v_); }

Value merge_attention(Value oa, Value la, Value ob, Value lb) {
  graph_of("merge_attention", {oa, la, ob, lb});
  return build(OpKind::MergeAttention, {oa, la, ob, lb}, {});
}

void Attention::check_unused(const char *what) const {
  Graph &g = v_.graph();
  if (!g.users(v_.id()).empty() || g.is_output(v_.id()))
    user_error(std::string("attention ") + q(v_.name()) + ": ." + what +
               "() must come before the result is used");
}

Attention &Attention::scale(double s) {
  check_unused("scale");
  user_check(s == s, "attention: scale is NaN");
  v_.graph().mutable_node(v_.id()).attrs.scale = s;
  return *this;
}

Attention &Attention::mask(const MaskFn &m) {
  check_unused("mask");
  user_check(m.expr != nullptr, "attention: empty mask_mod");
  Graph &g = v_.graph();
  Node &n = g.mutable_node(v_.id());
  ExprPtr combined = n.attrs.mask ? (BoolExpr(n.attrs.mask) && BoolExpr(m.expr)).ptr() : m.expr;
  std::vector<Value> inputs;
  for (NodeId id : n.inputs)
    inputs.emplace_back(&g, id);
  add_captures("attention", g, combined, inputs, v_.id());
  Attrs attrs = n.attrs;
  attrs.mask = combined;
  std::vector<NodeId> ids;
  for (const Value &v : inputs)
    ids.push_back(v.id());
  infer_type(g, OpKind::Attention, ids, attrs); // checks the mod against the captures
  Node &n2 = g.mutable_node(v_.id());
  n2.inputs = ids;
  n2.attrs = attrs;
  return *this;
}

Attention &Attention::score_mod(const ScoreFn &s) {
  check_unused("score_mod");
  user_check(s.expr != nullptr, "attention: empty score_mod");
  Graph &g = v_.graph();
  Node &n = g.mutable_node(v_.id());
  if (n.attrs.score)
    user_error("attention " + q(v_.name()) +
               ": score_mod is already set; compose both in one lambda");
  std::vector<Value> inputs;
  for (NodeId id : n.inputs)
    inputs.emplace_back(&g, id);
  add_captures("attention", g, s.expr, inputs, v_.id());
  Attrs attrs = n.attrs;
  attrs.score = s.expr;
  std::vector<NodeId> ids;
  for (const Value &v : inputs)
    ids.push_back(v.id());
  infer_type(g, OpKind::Attention, ids, attrs);
  Node &n2 = g.mutable_node(v_.id());
  n2.inputs = ids;
  n2.attrs = attrs;
  return *this;
}

} // namespace qkv
