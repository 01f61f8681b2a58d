// The op table and the ops' shape rules: the one place each op's facts and shape rule
// live (see <qkv/dsl/op_table.hpp>). Op builders call infer_type before adding a node;
// Graph::verify calls it again on every node, and the MLIR dialect's verifier through
// infer_unnamed. Every message names the op, the user's tensors and the dims, in the form
// `'Dh'(64)`.
#include <qkv/dsl/op_table.hpp>

#include "op_checks.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

namespace qkv {

namespace {

using namespace detail;

const Node &in(const Graph &g, const std::vector<NodeId> &inputs, std::size_t i, const char *op) {
  if (i >= inputs.size())
    internal_error(std::string(op) + ": missing input " + std::to_string(i));
  return g.node(inputs[i]);
}

void expect_float(const Node &n, const char *op) {
  if (!is_float(n.dtype))
    user_error(std::string(op) + ": " + who(n) + " is " + std::string(dtype_name(n.dtype)) +
               "; it needs a float tensor");
}

void expect_same_dtype(const Node &a, const Node &b, const char *op) {
  if (a.dtype != b.dtype)
    user_error(std::string(op) + ": dtypes differ: " + who(a) + " is " +
               std::string(dtype_name(a.dtype)) + ", " + who(b) + " is " +
               std::string(dtype_name(b.dtype)));
}

void expect_rank_at_least(const Node &n, int r, const char *op, const char *why) {
  if (n.rank() < r)
    user_error(std::string(op) + ": " + who(n) + " has " + std::to_string(n.rank()) + " dims; " +
               why);
}

/// A derived dim (H*Dh, a+b) matches a dim by static extent when both are static, else by
/// name: a dim named H*Dh whose extent is not the product does not split into these parts.
/// An unknown dim matches any.
bool derived_dim_matches(const Dim &derived, const Dim &d) {
  if (is_unknown(derived) || is_unknown(d))
    return true;
  if (derived.is_static() && d.is_static())
    return derived.extent == d.extent;
  return derived.name == d.name;
}

std::vector<Dim> slice(const std::vector<Dim> &d, std::size_t from, std::size_t to) {
  return std::vector<Dim>(d.begin() + from, d.begin() + to);
}

/// Checks a mod expression: its type, and that each tensor it loads is one of the op's
/// captured inputs with as many indices as dims.
void check_mod(const Graph &g, const ExprPtr &e, bool is_mask, const std::vector<NodeId> &inputs,
               int num_operands, const char *op) {
  if (!e)
    return;
  const char *mod = is_mask ? "mask_mod" : "score_mod";
  // Compiled kernels evaluate an f32, f16 or bf16 op's mods in f32 (the interpreter in
  // double): a constant past f32's range would become +-inf there and nowhere else.
  bool f32_mods = !inputs.empty() && g.node(inputs[0]).dtype != DType::F64;
  if (is_mask && e->type != ExprType::Bool)
    user_error(std::string(op) + ": mask_mod must be a condition, got " + to_string(e));
  if (!is_mask && e->type == ExprType::Bool)
    user_error(std::string(op) + ": score_mod must be a number, got the condition " + to_string(e));
  std::vector<const ExprNode *> stack{e.get()};
  while (!stack.empty()) {
    const ExprNode *n = stack.back();
    stack.pop_back();
    if (is_mask && n->op == ExprOp::Score)
      user_error(std::string(op) + ": mask_mod cannot use the score (use a score_mod)");
    if (f32_mods && n->op == ExprOp::ConstFloat && std::isfinite(n->fval) &&
        std::fabs(n->fval) > static_cast<double>(std::numeric_limits<float>::max())) {
      std::vector<std::string> names;
      for (const Node &x : g.nodes())
        names.push_back(x.name);
      std::ostringstream v;
      v << n->fval;
      user_error(std::string(op) + ": " + mod + " constant " + v.str() +
                 " is outside f32's range (|x| <= 3.4e+38): compiled kernels evaluate the " +
                 mod + " of a " + std::string(dtype_name(g.node(inputs[0]).dtype)) +
                 " op in f32, where it would be " + (n->fval < 0 ? "-inf" : "inf") +
                 " (the interpreter computes in double); in `" + to_string(e, &names) + "`");
    }
    if (n->op == ExprOp::Load) {
      auto it = std::find(inputs.begin() + num_operands, inputs.end(), n->tensor);
      if (it == inputs.end())
        user_error(std::string(op) + ": " + mod + " loads %" + std::to_string(n->tensor) +
                   ", which is not captured by this op");
      const Node &t = g.node(n->tensor);
      if (static_cast<int>(n->args.size()) != t.rank())
        user_error(std::string(op) + ": " + mod + " indexes " + who(t) + " with " +
                   std::to_string(n->args.size()) + " indices; it has " + std::to_string(t.rank()) +
                   " dims");
    }
    for (const auto &a : n->args)
      stack.push_back(a.get());
  }
}

InferredType infer_attention_like(const Graph &g, const std::vector<NodeId> &inputs,
                                  const char *op) {
  const Node &qn = in(g, inputs, 0, op), &kn = in(g, inputs, 1, op), &vn = in(g, inputs, 2, op);
  for (const Node *n : {&qn, &kn, &vn}) {
    expect_float(*n, op);
    if (n->rank() < 2 || n->rank() > 4)
      user_error(std::string(op) + ": " + who(*n) +
                 " must have 2 (L, Dh), 3 (H, L, Dh) or 4 (B, H, L, Dh) dims");
  }
  expect_same_dtype(qn, kn, op);
  expect_same_dtype(qn, vn, op);
  if (qn.rank() != kn.rank() || qn.rank() != vn.rank())
    user_error(std::string(op) + ": q, k and v must have the same number of dims: " + who(qn) +
               ", " + who(kn) + ", " + who(vn));
  int r = qn.rank();
  const Dim &dq = qn.dims[r - 1], &dk = kn.dims[r - 1];
  if (!same_dim(dq, dk))
    user_error(std::string(op) + ": q and k must share the head dim: " + q(qn.name) + " ends in " +
               describe(dq) + ", " + q(kn.name) + " in " + describe(dk));
  if (!same_dim(kn.dims[r - 2], vn.dims[r - 2]))
    user_error(std::string(op) + ": k and v must share the sequence dim: " + q(kn.name) + " has " +
               describe(kn.dims[r - 2]) + ", " + q(vn.name) + " has " + describe(vn.dims[r - 2]));
  if (r == 4 && (!same_dim(qn.dims[0], kn.dims[0]) || !same_dim(qn.dims[0], vn.dims[0])))
    user_error(std::string(op) + ": q, k and v must share the batch dim: " + who(qn) + ", " +
               who(kn) + ", " + who(vn));
  if (r >= 3) {
    const Dim &hq = qn.dims[r - 3], &hk = kn.dims[r - 3];
    if (hq.extent == 0 || hk.extent == 0) // only the dialect's tensors have empty dims
      user_error(std::string(op) + ": query and kv heads must not be 0: " + who(qn) + ", " +
                 who(kn));
    if (!same_dim(hk, vn.dims[r - 3]))
      user_error(std::string(op) + ": k and v must have the same heads: " + q(kn.name) + " has " +
                 describe(hk) + ", " + q(vn.name) + " has " + describe(vn.dims[r - 3]));
    // The dialect's `?` heads against a count may be a grouped-query attention: static only.
    if (!same_dim(hq, hk) || is_unknown(hq) != is_unknown(hk)) {
      if (hq.is_dynamic() || hk.is_dynamic())
        user_error(std::string(op) + ": q has heads " + describe(hq) + " and k has heads " +
                   describe(hk) + "; grouped-query attention needs both head counts static");
      if (hq.extent % hk.extent != 0)
        user_error(std::string(op) + ": " + std::to_string(hq.extent) + " query heads " +
                   describe(hq) + " cannot share " + std::to_string(hk.extent) + " kv heads " +
                   describe(hk) +
                   " (grouped-query attention needs a whole number of query heads per kv "
                   "head)");
    }
  }
  std::vector<Dim> out = slice(qn.dims, 0, r - 1);
  out.push_back(vn.dims[r - 1]);
  return {qn.dtype, out};
}

/// positions for rope: (L) or (B, L), integer, L the second-to-last dim of x and B its
/// first.
void check_rope_positions(const Node &x, const Node &p) {
  if (!is_int(p.dtype))
    user_error("rope: positions " + who(p) + " must be i32 or i64, got " +
               std::string(dtype_name(p.dtype)));
  const Dim &l = x.dims[x.rank() - 2];
  bool ok =
      (p.rank() == 1 && same_dim(p.dims[0], l)) ||
      (p.rank() == 2 && x.rank() >= 3 && same_dim(p.dims[0], x.dims[0]) && same_dim(p.dims[1], l));
  if (!ok)
    user_error("rope: positions " + who(p) + " must be (" + l.name + ") or (" + x.dims[0].name +
               ", " + l.name + ") for " + who(x));
}

void expect_int_vector(const Node &n, const Dim &len, const char *op, const char *what) {
  if (!is_int(n.dtype) || n.rank() != 1 || !same_dim(n.dims[0], len))
    user_error(std::string(op) + ": " + what + " " + who(n) + " must be an i32 or i64 (" +
               len.name + ")");
}

/// cache_view(past, lengths, fresh), paged_cache_view(pool, table, lengths, fresh).
InferredType infer_cache_view(const Graph &g, OpKind op, const std::vector<NodeId> &inputs) {
  bool paged = op == OpKind::PagedCacheView;
  std::string name(op_name(op));
  const char *o = name.c_str();
  const Node &store = in(g, inputs, 0, o), &fresh = in(g, inputs, paged ? 3 : 2, o);
  const Node &lengths = in(g, inputs, paged ? 2 : 1, o);
  expect_float(store, o);
  expect_same_dtype(store, fresh, o);
  if (store.rank() != 4 || fresh.rank() != 4)
    user_error(name + ": " + who(store) + " and " + who(fresh) + " must have 4 dims (" +
               (paged ? "pages, Hkv, page, Dh) and (B, Hkv, n, Dh)" : "B, Hkv, C, Dh)"));
  const Dim &b = fresh.dims[0];
  if (!same_dim(store.dims[1], fresh.dims[1]) || !same_dim(store.dims[3], fresh.dims[3]))
    user_error(name + ": " + who(store) + " and " + who(fresh) +
               " must share kv heads (dim 1) and head dim (dim 3)");
  expect_int_vector(lengths, b, o, "lengths");
  Dim rows = store.dims[2];
  if (!paged) {
    if (!same_dim(store.dims[0], b))
      user_error(name + ": " + who(store) + " and " + who(fresh) + " must share the batch dim");
  } else {
    const Node &table = in(g, inputs, 1, o);
    if (!is_int(table.dtype) || table.rank() != 2 || !same_dim(table.dims[0], b))
      user_error(name + ": table " + who(table) + " must be an i32 or i64 (" + b.name +
                 ", pages per sequence)");
    rows = product(table.dims[1], store.dims[2]);
  }
  std::vector<Dim> out = {b, fresh.dims[1], sum({rows, fresh.dims[2]}), fresh.dims[3]};
  return {store.dtype, out};
}

// ---- shape rules, one per op (or family) -------------------------------------------------

using Ids = std::vector<NodeId>;

/// The op's name as a C string (the table's names are literals).
const char *cname(OpKind op) { return op_info(op).name.data(); }

InferredType matmul_rule(const Graph &g, OpKind op, const Ids &inputs, const Attrs &) {
  const char *o = cname(op);
  const Node &a = in(g, inputs, 0, o), &b = in(g, inputs, 1, o);
  expect_float(a, o);
  expect_same_dtype(a, b, o);
  expect_rank_at_least(a, 2, o, "matmul needs at least 2 (rows, cols)");
  expect_rank_at_least(b, 2, o, "matmul needs at least 2 (rows, cols)");
  const Dim &ka = a.dims[a.rank() - 1], &kb = b.dims[b.rank() - 2];
  if (!same_dim(ka, kb))
    user_error("matmul: contraction dims differ: " + q(a.name) + " " + describe(a.dims) +
               " has " + describe(ka) + " last, " + q(b.name) + " " + describe(b.dims) + " has " +
               describe(kb) + " second to last");
  std::vector<Dim> ba = slice(a.dims, 0, a.rank() - 2), bb = slice(b.dims, 0, b.rank() - 2);
  std::vector<Dim> batch;
  if (bb.empty())
    batch = ba;
  else if (ba.empty())
    batch = bb;
  else if (same_dims(ba, bb))
    batch = ba;
  else
    user_error("matmul: batch dims differ: " + who(a) + " has " + describe(ba) + ", " + who(b) +
               " has " + describe(bb) + " (they must be equal, or one side must be 2-D)");
  batch.push_back(a.dims[a.rank() - 2]);
  batch.push_back(b.dims[b.rank() - 1]);
  return {a.dtype, batch};
}

InferredType linear_rule(const Graph &g, OpKind op, const Ids &inputs, const Attrs &) {
  const char *o = cname(op);
  const Node &x = in(g, inputs, 0, o), &w = in(g, inputs, 1, o);
  expect_float(x, o);
  expect_same_dtype(x, w, o);
  expect_rank_at_least(x, 1, o, "linear needs at least one dim");
  if (w.rank() != 2)
    user_error("linear: weight " + who(w) + " must have 2 dims (in, out)");
  if (!same_dim(x.dims.back(), w.dims[0]))
    user_error("linear: " + q(x.name) + " " + describe(x.dims) + " ends in " +
               describe(x.dims.back()) + " but weight " + q(w.name) + " " + describe(w.dims) +
               " starts with " + describe(w.dims[0]) +
               " (the input dim must be the weight's first dim)");
  if (inputs.size() == 3) {
    const Node &bias = in(g, inputs, 2, o);
    expect_same_dtype(x, bias, o);
    if (bias.rank() != 1 || !same_dim(bias.dims[0], w.dims[1]))
      user_error("linear: bias " + who(bias) + " must be (" + w.dims[1].name +
                 "), the weight's output dim " + describe(w.dims[1]));
  }
  std::vector<Dim> out = slice(x.dims, 0, x.rank() - 1);
  out.push_back(w.dims[1]);
  return {x.dtype, out};
}

InferredType transpose_rule(const Graph &g, OpKind op, const Ids &inputs, const Attrs &attrs) {
  const Node &x = in(g, inputs, 0, cname(op));
  expect_float(x, cname(op)); // the compiled ops move float data; ids need no transposing
  if (attrs.axes.size() != 2)
    internal_error("transpose needs two axes");
  int a = normalize_axis(attrs.axes[0], x.rank(), "transpose of " + q(x.name));
  int b = normalize_axis(attrs.axes[1], x.rank(), "transpose of " + q(x.name));
  std::vector<Dim> out = x.dims;
  std::swap(out[a], out[b]);
  return {x.dtype, out};
}

/// The attributes of the position encodings (rope, sinusoidal_pe): the DSL's builders and
/// the dialect's verifier both refuse through the rule what no position could mean.
void check_position_attrs(const char *op, const Attrs &attrs) {
  if (!(attrs.base > 0))
    user_error(std::string(op) + ": base must be positive");
  if (attrs.offset < 0)
    user_error(std::string(op) + ": offset must not be negative");
}

/// Elementwise ops of one float tensor: gelu, silu, elu, softplus, scale, softmax,
/// sinusoidal_pe.
InferredType unary_rule(const Graph &g, OpKind op, const Ids &inputs, const Attrs &attrs) {
  const char *o = cname(op);
  const Node &x = in(g, inputs, 0, o);
  expect_float(x, o);
  if (op == OpKind::Scale && !attrs.scale)
    internal_error("scale without a factor");
  if (op == OpKind::Softmax) {
    if (attrs.axes.size() != 1)
      internal_error("softmax needs one axis");
    normalize_axis(attrs.axes[0], x.rank(), "softmax of " + q(x.name));
  }
  if (op == OpKind::SinusoidalPE) {
    check_position_attrs(o, attrs);
    expect_rank_at_least(x, 2, o, "it adds positions over the last two (position, feature)");
  }
  return {x.dtype, x.dims};
}

/// add, sub, mul, div: the shorter operand's dims must end the longer's.
InferredType broadcast_rule(const Graph &g, OpKind op, const Ids &inputs, const Attrs &) {
  const char *o = cname(op);
  const Node &a = in(g, inputs, 0, o), &b = in(g, inputs, 1, o);
  expect_float(a, o);
  expect_same_dtype(a, b, o);
  const Node &lng = a.rank() >= b.rank() ? a : b, &sht = a.rank() >= b.rank() ? b : a;
  std::vector<Dim> tail = slice(lng.dims, lng.rank() - sht.rank(), lng.rank());
  if (!same_dims(tail, sht.dims))
    user_error(std::string(o) + ": shapes do not match: " + who(a) + " and " + who(b) +
               " (they must be equal, or the shorter must end the longer)");
  return {a.dtype, lng.dims};
}

InferredType split_heads_rule(const Graph &g, OpKind op, const Ids &inputs, const Attrs &attrs) {
  const char *o = cname(op);
  const Node &x = in(g, inputs, 0, o);
  expect_float(x, o);
  expect_rank_at_least(x, 2, o, "split_heads needs (..., L, H*Dh)");
  if (attrs.dims.size() != 2)
    internal_error("split_heads needs heads and head_dim");
  const Dim &h = attrs.dims[0], &dh = attrs.dims[1];
  const Dim &last = x.dims.back();
  Dim prod = product(h, dh);
  if (!derived_dim_matches(prod, last)) {
    if (last.is_dynamic())
      user_error("split_heads: " + who(x) + " ends in " + describe(last) +
                 ", which is dynamic; split_heads needs a static last dim (or one named " +
                 prod.name + ")");
    user_error("split_heads: " + who(x) + " ends in " + describe(last) +
               ", which cannot split into " + describe(h) + " heads of " + describe(dh) +
               (prod.is_static() ? " (" + std::to_string(prod.extent) +
                                       " != " + std::to_string(last.extent) + ")"
                                 : std::string()));
  }
  std::vector<Dim> out = slice(x.dims, 0, x.rank() - 2);
  out.push_back(h);
  out.push_back(x.dims[x.rank() - 2]);
  out.push_back(dh);
  return {x.dtype, out};
}

InferredType merge_heads_rule(const Graph &g, OpKind op, const Ids &inputs, const Attrs &attrs) {
  const char *o = cname(op);
  const Node &x = in(g, inputs, 0, o);
  expect_float(x, o);
  expect_rank_at_least(x, 3, o, "merge_heads needs (..., H, L, Dh)");
  int r = x.rank();
  const Dim &h = x.dims[r - 3], &dh = x.dims[r - 1];
  Dim out_dim = product(h, dh);
  if (!attrs.dims.empty()) {
    const Dim &want = attrs.dims[0];
    if (!derived_dim_matches(out_dim, want))
      user_error("merge_heads: " + who(x) + " merges " + describe(h) + " heads of " +
                 describe(dh) + " into " +
                 (out_dim.is_static() ? std::to_string(out_dim.extent) : out_dim.name) +
                 " features, which is not " + describe(want));
    out_dim = want;
  }
  std::vector<Dim> out = slice(x.dims, 0, r - 3);
  out.push_back(x.dims[r - 2]);
  out.push_back(out_dim);
  return {x.dtype, out};
}

InferredType concat_rule(const Graph &g, OpKind op, const Ids &inputs, const Attrs &attrs) {
  const char *o = cname(op);
  if (inputs.empty())
    user_error("concat: needs at least one tensor");
  const Node &first = in(g, inputs, 0, o);
  expect_float(first, o);
  if (attrs.axes.size() != 1)
    internal_error("concat needs one axis");
  int ax = normalize_axis(attrs.axes[0], first.rank(), "concat of " + q(first.name));
  std::vector<Dim> parts;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Node &x = in(g, inputs, i, o);
    expect_same_dtype(first, x, o);
    if (x.rank() != first.rank())
      user_error("concat: " + who(first) + " and " + who(x) + " have different numbers of dims");
    for (int d = 0; d < x.rank(); ++d)
      if (d != ax && !same_dim(x.dims[d], first.dims[d]))
        user_error("concat: along axis " + std::to_string(ax) + ", the other dims must match: " +
                   who(first) + " has " + describe(first.dims[d]) + ", " + who(x) + " has " +
                   describe(x.dims[d]));
    parts.push_back(x.dims[ax]);
  }
  Dim joined = sum(parts);
  if (!attrs.dims.empty()) {
    const Dim &want = attrs.dims[0];
    if (!derived_dim_matches(joined, want))
      user_error("concat: the parts add up to " + describe(joined) + ", which is not " +
                 describe(want));
    joined = want;
  }
  std::vector<Dim> out = first.dims;
  out[ax] = joined;
  return {first.dtype, out};
}

/// mask, score_mod: scores (L, S), (H, L, S) or (B, H, L, S), then the captured tensors.
InferredType mod_rule(const Graph &g, OpKind op, const Ids &inputs, const Attrs &attrs) {
  const char *o = cname(op);
  const Node &s = in(g, inputs, 0, o);
  expect_float(s, o);
  if (s.rank() < 2 || s.rank() > 4)
    user_error(std::string(o) + ": scores " + who(s) +
               " must have 2 (L, S), 3 (H, L, S) or 4 (B, H, L, S) dims");
  bool is_mask = op == OpKind::Mask;
  const ExprPtr &e = is_mask ? attrs.mask : attrs.score;
  if (!e)
    internal_error(std::string(o) + " without an expression");
  check_mod(g, e, is_mask, inputs, 1, o);
  return {s.dtype, s.dims};
}

InferredType rope_rule(const Graph &g, OpKind op, const Ids &inputs, const Attrs &attrs) {
  const char *o = cname(op);
  const Node &x = in(g, inputs, 0, o);
  check_position_attrs(o, attrs);
  expect_float(x, o);
  expect_rank_at_least(x, 2, o, "rope needs (..., L, Dh)");
  const Dim &d = x.dims.back();
  if (d.is_dynamic() || d.extent % 2 != 0)
    user_error("rope: " + who(x) + " ends in " + describe(d) +
               "; rope rotates pairs of features and needs a static, even last dim");
  if (inputs.size() == 2) {
    check_rope_positions(x, in(g, inputs, 1, o));
    if (attrs.offset != 0)
      user_error("rope: positions and an offset cannot be combined");
  }
  return {x.dtype, x.dims};
}

/// layer_norm (x, gamma, beta), rms_norm (x, gamma): over the last dim.
InferredType norm_rule(const Graph &g, OpKind op, const Ids &inputs, const Attrs &attrs) {
  const char *o = cname(op);
  if (!(attrs.eps >= 0))
    user_error(std::string(o) + ": eps must not be negative");
  const Node &x = in(g, inputs, 0, o);
  expect_float(x, o);
  expect_rank_at_least(x, 1, o, "it normalises over the last dim");
  for (std::size_t i = 1; i < inputs.size(); ++i) {
    const Node &p = in(g, inputs, i, o);
    expect_same_dtype(x, p, o);
    if (p.rank() != 1 || !same_dim(p.dims[0], x.dims.back()))
      user_error(std::string(o) + ": " + (i == 1 ? "gamma " : "beta ") + who(p) + " must be (" +
                 x.dims.back().name + "), the last dim of " + who(x));
  }
  return {x.dtype, x.dims};
}

InferredType swiglu_rule(const Graph &g, OpKind op, const Ids &inputs, const Attrs &) {
  const char *o = cname(op);
  const Node &a = in(g, inputs, 0, o), &b = in(g, inputs, 1, o);
  expect_float(a, o);
  expect_same_dtype(a, b, o);
  if (!same_dims(a.dims, b.dims))
    user_error("swiglu: gate " + who(a) + " and up " + who(b) + " must have the same dims");
  return {a.dtype, a.dims};
}

InferredType embedding_rule(const Graph &g, OpKind op, const Ids &inputs, const Attrs &) {
  const char *o = cname(op);
  const Node &ids = in(g, inputs, 0, o), &table = in(g, inputs, 1, o);
  if (!is_int(ids.dtype))
    user_error("embedding: ids " + who(ids) + " must be i32 or i64, got " +
               std::string(dtype_name(ids.dtype)));
  expect_float(table, o);
  if (table.rank() != 2)
    user_error("embedding: table " + who(table) + " must have 2 dims (vocab, features)");
  std::vector<Dim> out = ids.dims;
  out.push_back(table.dims[1]);
  return {table.dtype, out};
}

InferredType attention_rule(const Graph &g, OpKind op, const Ids &inputs, const Attrs &attrs) {
  const char *o = cname(op);
  InferredType t = infer_attention_like(g, inputs, o);
  check_mod(g, attrs.mask, true, inputs, 3, o);
  check_mod(g, attrs.score, false, inputs, 3, o);
  if (attrs.scale && !(*attrs.scale == *attrs.scale))
    user_error("attention: scale is NaN");
  return t;
}

/// attention_lse: one attention node (f32 or f64) -> its (..., Hq, L).
InferredType attention_lse_rule(const Graph &g, OpKind op, const Ids &inputs, const Attrs &) {
  const char *o = cname(op);
  const Node &a = in(g, inputs, 0, o);
  if (a.op != OpKind::Attention)
    user_error("attention_lse: " + who(a) + " is a " + std::string(op_name(a.op)) +
               ", not an attention (call .lse() on what attention() returns)");
  if (a.dtype != DType::F32 && a.dtype != DType::F64)
    user_error("attention_lse: attention " + who(a) + " is " + std::string(dtype_name(a.dtype)) +
               "; the log-sum-exp is computed for f32 and f64 attention only");
  return {a.dtype, slice(a.dims, 0, a.rank() - 1)};
}

/// merge_attention (oa, la, ob, lb): two partials of the same rows; merge_lse (la, lb).
InferredType merge_rule(const Graph &g, OpKind op, const Ids &inputs, const Attrs &) {
  const char *o = cname(op);
  bool outs = op == OpKind::MergeAttention;
  const Node &la = in(g, inputs, outs ? 1 : 0, o), &lb = in(g, inputs, outs ? 3 : 1, o);
  for (const Node *l : {&la, &lb}) {
    expect_float(*l, o);
    expect_same_dtype(la, *l, o);
  }
  if (!same_dims(la.dims, lb.dims))
    user_error(std::string(o) + ": the log-sum-exps " + who(la) + " and " + who(lb) +
               " must have the same dims");
  if (!outs)
    return {la.dtype, la.dims};
  const Node &oa = in(g, inputs, 0, o), &ob = in(g, inputs, 2, o);
  expect_same_dtype(la, oa, o);
  expect_same_dtype(la, ob, o);
  if (!same_dims(oa.dims, ob.dims))
    user_error("merge_attention: the partial outputs " + who(oa) + " and " + who(ob) +
               " must have the same dims");
  if (oa.rank() != la.rank() + 1 || !same_dims(slice(oa.dims, 0, oa.rank() - 1), la.dims))
    user_error("merge_attention: the partial output " + who(oa) +
               " must be its log-sum-exp's dims " + describe(la.dims) + " and one more (Dv); " +
               q(la.name) + " does not fit");
  return {oa.dtype, oa.dims};
}

InferredType linear_attention_rule(const Graph &g, OpKind op, const Ids &inputs, const Attrs &) {
  return infer_attention_like(g, inputs, cname(op));
}

InferredType linformer_rule(const Graph &g, OpKind op, const Ids &inputs, const Attrs &) {
  const char *o = cname(op);
  const Node &x = in(g, inputs, 0, o), &e = in(g, inputs, 1, o);
  expect_float(x, o);
  expect_same_dtype(x, e, o);
  expect_rank_at_least(x, 2, o, "linformer_project needs (..., S, D)");
  if (e.rank() != 2)
    user_error("linformer_project: projection " + who(e) + " must have 2 dims (K', S)");
  const Dim &s = x.dims[x.rank() - 2];
  if (!same_dim(e.dims[1], s))
    user_error("linformer_project: projection " + q(e.name) + " " + describe(e.dims) +
               " must end in the sequence dim of " + who(x) + ", " + describe(s) +
               "; it ends in " + describe(e.dims[1]));
  std::vector<Dim> out = slice(x.dims, 0, x.rank() - 2);
  out.push_back(e.dims[0]);
  out.push_back(x.dims.back());
  return {x.dtype, out};
}

InferredType cache_view_rule(const Graph &g, OpKind op, const Ids &inputs, const Attrs &) {
  return infer_cache_view(g, op, inputs);
}

// ---- the table ----------------------------------------------------------------------------

constexpr int kAny = kAnyNumber;
using F = AttrField;

constexpr OpInfo leaf(OpKind k, std::string_view name, std::array<AttrUse, 3> attrs = {}) {
  return {k, name, 0, 0, kAny, attrs, {}, false, {}, nullptr};
}

using B = ErrorBound;
constexpr ErrorRule kExact{B::Exact}, kLargestOperand{B::LargestOperand};

constexpr std::array<OpInfo, kNumOpKinds> kOps = {{
    leaf(OpKind::Input, "input"),
    leaf(OpKind::Param, "param"),
    leaf(OpKind::Constant, "constant", {{{F::Data, "values"}}}),
    {OpKind::MatMul, "matmul", 2, 2, kAny, {}, {}, false, {B::Contraction}, matmul_rule},
    {OpKind::Linear, "linear", 2, 3, kAny, {}, {}, false, {B::Contraction}, linear_rule},
    {OpKind::Transpose, "transpose", 1, 1, kAny, {{{F::Axes, "axes"}}},
     {{{"axis_a", F::Axes, 0}, {"axis_b", F::Axes, 1}}}, true, kExact, transpose_rule},
    {OpKind::Scale, "scale", 1, 1, kAny, {{{F::Scale, "scale"}}}, {{{"factor", F::Scale}}}, false,
     kExact, unary_rule},
#define QKV_BINARY_ROW(kind, builder, bound, summary)                                          \
  {OpKind::kind, #builder, 2, 2, kAny, {}, {}, false, {B::bound}, broadcast_rule},
    QKV_BROADCAST_BINARY(QKV_BINARY_ROW)
#undef QKV_BINARY_ROW
    {OpKind::Softmax, "softmax", 1, 1, kAny, {{{F::Axes, "axis", AttrStyle::First}}},
     {{{"axis", F::Axes}}}, false, {B::AxisSoftmax}, unary_rule},
    {OpKind::SplitHeads, "split_heads", 1, 1, kAny, {{{F::Dims, "heads"}}},
     {{{"heads", F::Dims}}}, true, kExact, split_heads_rule},
    {OpKind::MergeHeads, "merge_heads", 1, 1, kAny, {{{F::Dims, "out"}}}, {}, true, kExact,
     merge_heads_rule},
    {OpKind::Concat, "concat", 0, kAny, kAny,
     {{{F::Axes, "axis", AttrStyle::First}, {F::Dims, "out"}}}, {{{"axis", F::Axes}}}, true,
     kExact, concat_rule},
    {OpKind::Mask, "mask", 1, kAny, 1, {{{F::Mask, "mask"}}}, {}, false, kExact, mod_rule},
    {OpKind::ScoreMod, "score_mod", 1, kAny, 1, {{{F::Score, "score"}}}, {}, false,
     {B::LargestResult}, mod_rule},
    {OpKind::SinusoidalPE, "sinusoidal_pe", 1, 1, kAny,
     {{{F::Base, "base"}, {F::Offset, "offset"}}}, {{{"base", F::Base}, {"offset", F::Offset}}},
     false, {B::Positions}, unary_rule},
    {OpKind::Rope, "rope", 1, 2, kAny,
     {{{F::Base, "base"}, {F::Offset, "offset"}, {F::Interleaved, "interleaved"}}},
     {{{"base", F::Base}, {"offset", F::Offset}, {"interleaved", F::Interleaved}}}, false,
     {B::Positions}, rope_rule},
    {OpKind::LayerNorm, "layer_norm", 1, 3, kAny, {{{F::Eps, "eps"}}}, {{{"eps", F::Eps}}}, false,
     {B::CenteredNorm}, norm_rule},
    {OpKind::RmsNorm, "rms_norm", 1, 2, kAny, {{{F::Eps, "eps"}}}, {{{"eps", F::Eps}}}, false,
     {B::Norm}, norm_rule},
    {OpKind::Gelu, "gelu", 1, 1, kAny, {{{F::Approximate, "approximate", AttrStyle::TanhOrNone}}},
     {{{"approximate", F::Approximate}}}, false, kLargestOperand, unary_rule},
    {OpKind::Elu, "elu", 1, 1, kAny, {{{F::Alpha, "alpha"}}}, {{{"alpha", F::Alpha}}}, false,
     kLargestOperand, unary_rule},
#define QKV_ACTIVATION_ROW(kind, builder, bound, summary)                                      \
  {OpKind::kind, #builder, 1, 1, kAny, {}, {}, false, {B::OperandPlus, bound}, unary_rule},
    QKV_PLAIN_ACTIVATIONS(QKV_ACTIVATION_ROW)
#undef QKV_ACTIVATION_ROW
    {OpKind::Swiglu, "swiglu", 2, 2, kAny, {}, {}, false, kLargestOperand, swiglu_rule},
    {OpKind::Embedding, "embedding", 2, 2, kAny, {}, {}, true, kExact, embedding_rule},
    {OpKind::Attention, "attention", 3, kAny, 3,
     {{{F::Scale, "scale"}, {F::Mask, "mask"}, {F::Score, "score"}}}, {{{"scale", F::Scale}}},
     false, {B::Attention}, attention_rule},
    {OpKind::LinformerProject, "linformer_project", 2, 2, kAny, {}, {}, false,
     {B::SequenceContraction}, linformer_rule},
    {OpKind::LinearAttention, "linear_attention", 3, 3, kAny, {{{F::FeatureMap, "feature_map"}}},
     {{{"feature_map", F::FeatureMap}}}, false, {B::LinearAttention}, linear_attention_rule},
    {OpKind::CacheView, "cache_view", 3, 3, kAny, {}, {}, true, kExact, cache_view_rule},
    {OpKind::PagedCacheView, "paged_cache_view", 4, 4, kAny, {}, {}, true, kExact,
     cache_view_rule},
    // The attention it reads adds its own bound; the log adds its result's magnitude.
    {OpKind::AttentionLse, "attention_lse", 1, 1, kAny, {}, {}, false, {B::LargestResult},
     attention_lse_rule},
    {OpKind::MergeAttention, "merge_attention", 4, 4, kAny, {}, {}, false, {B::LseMerge},
     merge_rule},
    {OpKind::MergeLse, "merge_lse", 2, 2, kAny, {}, {}, false, {B::LseMerge}, merge_rule},
}};

constexpr bool rows_in_enum_order() {
  for (int i = 0; i < kNumOpKinds; ++i)
    if (static_cast<int>(kOps[i].kind) != i)
      return false;
  return true;
}
static_assert(rows_in_enum_order(), "kOps: one row per OpKind, in the enum's order");

constexpr bool movers_are_exact() {
  for (const OpInfo &row : kOps)
    if (row.moves_elements && row.bound.kind != ErrorBound::Exact)
      return false;
  return true;
}
static_assert(movers_are_exact(), "kOps: an op that only moves elements adds no error");

} // namespace

std::span<const OpInfo> op_table() { return kOps; }

const OpInfo &op_info(OpKind op) {
  auto i = static_cast<std::size_t>(op);
  if (i >= kOps.size())
    internal_error("op_info: op " + std::to_string(i) + " is not in the table");
  return kOps[i];
}

std::string_view op_name(OpKind op) { return op_info(op).name; }

std::optional<OpKind> parse_op_name(std::string_view name) {
  for (const OpInfo &o : kOps)
    if (o.name == name)
      return o.kind;
  return std::nullopt;
}

InferredType infer_type(const Graph &g, OpKind op, const std::vector<NodeId> &inputs,
                        const Attrs &attrs) {
  const OpInfo &info = op_info(op);
  if (!info.shape)
    internal_error("infer_type on a leaf");
  auto n = static_cast<int>(inputs.size());
  if (n < info.min_inputs || (info.max_inputs != kAny && n > info.max_inputs))
    internal_error(std::string(info.name) + ": " + std::to_string(n) + " inputs");
  return info.shape(g, op, inputs, attrs);
}

UnnamedType infer_unnamed(OpKind op, const std::vector<UnnamedType> &operands, const Attrs &attrs) {
  Graph g("unnamed");
  std::vector<NodeId> ids;
  for (std::size_t i = 0; i < operands.size(); ++i) {
    // An input of no dims, then given the operand's: such dims are not identifiers.
    Node &n = g.mutable_node(g.input("operand" + std::to_string(i), operands[i].dtype, {}).id());
    n.name = "operand " + std::to_string(i);
    for (std::int64_t e : operands[i].extents)
      n.dims.push_back(e == kDynamic ? unknown_dim() : Dim(std::to_string(e), e));
    ids.push_back(n.id);
  }
  InferredType t = infer_type(g, op, ids, attrs);
  UnnamedType out{t.dtype, {}};
  for (const Dim &d : t.dims)
    out.extents.push_back(d.extent);
  return out;
}

int normalize_axis(std::int64_t axis, int rank, const std::string &what) {
  std::int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    user_error(what + ": axis " + std::to_string(axis) + " is out of range for " +
               std::to_string(rank) + " dims");
  return static_cast<int>(a);
}

int Node::num_operands() const {
  int k = op_info(op).operands;
  return k == kAnyNumber ? static_cast<int>(inputs.size()) : k;
}

} // namespace qkv
