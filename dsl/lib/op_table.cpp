// The op table and the ops' shape rules: the one place each op's facts and shape rule
// live (see <qkv/dsl/op_table.hpp>). Op builders call infer_type before adding a node;
// Graph::verify calls it again on every node, and the MLIR dialect's verifier through
// infer_unnamed. Every message names the op, the user's tensors and the dims, in the form
// `'Dh'(64)`.
#include <qkv/dsl/op_table.hpp>
#include <qkv/dsl/shape_rules.hpp>

#include "format.hpp"
#include "op_checks.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

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
      user_error(std::string(op) + ": " + mod + " constant " + format_double(n->fval) +
                 " is outside f32's range (|x| <= 3.4e+38): compiled kernels evaluate the " + mod +
                 " of a " + std::string(dtype_name(g.node(inputs[0]).dtype)) +
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

// ---- the shape rules' operands and results -----------------------------------------------

using Ids = std::vector<NodeId>;
using shape::Rule;
using shape::Verdict;

/// The op's name as a C string (the table's names are literals).
const char *cname(OpKind op) { return op_info(op).name.data(); }

/// An op's inputs as the shared rules (<qkv/dsl/shape_rules.hpp>) see them, and the result
/// a rule's verdict describes, built from the nodes' dims.
struct Operands {
  std::vector<const Node *> nodes;
  std::vector<std::vector<shape::DimView>> dims;
  std::vector<shape::TensorView> views;
  std::vector<shape::DimView> given_views;
  std::vector<Dim> given;

  Operands(const Graph &g, const Ids &inputs, std::size_t count, std::vector<Dim> given_dims = {})
      : given(std::move(given_dims)) {
    for (std::size_t i = 0; i < count && i < inputs.size(); ++i) {
      nodes.push_back(&g.node(inputs[i]));
      dims.emplace_back();
      for (const Dim &d : nodes.back()->dims)
        dims.back().push_back(view_of(d));
    }
    for (std::size_t i = 0; i < nodes.size(); ++i)
      views.push_back({nodes[i]->dtype, dims[i]});
    for (const Dim &d : given)
      given_views.push_back(view_of(d));
  }
  const Node &node(int i) const { return *nodes[static_cast<std::size_t>(i)]; }
  const Dim &dim(int op, int d) const { return node(op).dims[static_cast<std::size_t>(d)]; }

  Dim source(const shape::DimSource &s) const {
    using K = shape::DimSource;
    switch (s.kind) {
    case K::Operand: return dim(s.op, s.dim);
    case K::Given: return given.at(static_cast<std::size_t>(s.dim));
    case K::Product: return product(dim(s.op, s.dim), dim(s.op2, s.dim2));
    case K::Sum: return sum({dim(s.op, s.dim), dim(s.op2, s.dim2)});
    case K::ProductPlus:
      return sum({product(dim(s.op, s.dim), dim(s.op2, s.dim2)), dim(s.op3, s.dim3)});
    case K::SumAll: {
      std::vector<Dim> parts;
      for (const Node *n : nodes)
        parts.push_back(n->dims[static_cast<std::size_t>(s.dim)]);
      return sum(parts);
    }
    }
    internal_error("shape rule: a result dim of no kind");
  }
  InferredType result(const Verdict &v) const {
    std::vector<Dim> out;
    for (int i = 0; i < v.rank; ++i)
      out.push_back(source(v.dims[static_cast<std::size_t>(i)]));
    return {node(v.dtype_of).dtype, out};
  }
};

/// What a broken rule's message says of operand `op` (dim `d`, -1 for all of it): 'x' (L,
/// D), and the dim, 'D'(512) at dim 1; the given dims for shape::kGiven.
std::string about(const Operands &o, int op, int d) {
  if (op >= shape::kGiven)
    return describe(o.given);
  const Node &n = o.node(op);
  return who(n) + (d >= 0 ? ", its " + describe(o.dim(op, d)) + " at dim " + std::to_string(d)
                          : std::string());
}

/// The messages of the rules every op shares, and for any other rule the rule's sentence
/// (shape::summary) and what it is about: an op needs messages of its own only where they
/// say more.
[[noreturn]] void common_error(const Verdict &v, const char *op, const Operands &o) {
  switch (v.broken) {
  case Rule::is_float_tensor: expect_float(o.node(v.a), op); break;
  case Rule::same_dtype: expect_same_dtype(o.node(v.a), o.node(v.b), op); break;
  default: break;
  }
  std::string_view rule = shape::summary(v.broken), prefix = op;
  if (rule.substr(0, prefix.size()) == prefix && rule.substr(prefix.size(), 2) == ": ")
    rule.remove_prefix(prefix.size() + 2);
  std::string msg = std::string(op) + ": " + std::string(rule);
  bool rank = shape::is_rank_rule(v.broken);
  if (v.a >= 0)
    msg += ": " + about(o, v.a, v.da) +
           (rank ? " has " + std::to_string(o.node(v.a).rank()) + " dims" : std::string());
  if (v.b >= 0)
    msg += "; " + about(o, v.b, v.db);
  user_error(msg);
}

/// An op with no message of its own: the shared ones.
InferredType checked(const Verdict &v, const char *op, const Operands &o) {
  if (!v.ok())
    common_error(v, op, o);
  return o.result(v);
}

// ---- shape rules, one per op (or family) -------------------------------------------------

[[noreturn]] void matmul_error(const Verdict &v, const Operands &o) {
  const Node &a = o.node(0), &b = o.node(1);
  switch (v.broken) {
  case Rule::rank_at_least_2:
    expect_rank_at_least(o.node(v.a), 2, "matmul", "matmul needs at least 2 (rows, cols)");
    break;
  case Rule::matmul_contraction_dims_match:
    user_error("matmul: contraction dims differ: " + q(a.name) + " " + describe(a.dims) + " has " +
               describe(o.dim(0, v.da)) + " last, " + q(b.name) + " " + describe(b.dims) + " has " +
               describe(o.dim(1, v.db)) + " second to last");
  case Rule::matmul_batch_dims_match:
    user_error("matmul: batch dims differ: " + who(a) + " has " +
               describe(slice(a.dims, 0, a.rank() - 2)) + ", " + who(b) + " has " +
               describe(slice(b.dims, 0, b.rank() - 2)) +
               " (they must be equal, or one side must be 2-D)");
  default: break;
  }
  common_error(v, "matmul", o);
}

InferredType matmul_rule(const Graph &g, OpKind, const Ids &inputs, const Attrs &) {
  Operands o(g, inputs, 2);
  Verdict v = shape::matmul(o.views);
  if (!v.ok())
    matmul_error(v, o);
  return o.result(v);
}

[[noreturn]] void linear_error(const Verdict &v, const Operands &o) {
  const Node &x = o.node(0), &w = o.node(1);
  switch (v.broken) {
  case Rule::rank_at_least_1:
    expect_rank_at_least(x, 1, "linear", "linear needs at least one dim");
    break;
  case Rule::rank_is_2: user_error("linear: weight " + who(w) + " must have 2 dims (in, out)");
  case Rule::linear_input_dim_is_weight_first_dim:
    user_error("linear: " + q(x.name) + " " + describe(x.dims) + " ends in " +
               describe(x.dims.back()) + " but weight " + q(w.name) + " " + describe(w.dims) +
               " starts with " + describe(w.dims[0]) +
               " (the input dim must be the weight's first dim)");
  case Rule::linear_bias_is_weight_out_dim:
    user_error("linear: bias " + who(o.node(2)) + " must be (" + w.dims[1].name +
               "), the weight's output dim " + describe(w.dims[1]));
  default: break;
  }
  common_error(v, "linear", o);
}

InferredType linear_rule(const Graph &g, OpKind, const Ids &inputs, const Attrs &) {
  Operands o(g, inputs, 3);
  Verdict v = shape::linear(o.views);
  if (!v.ok())
    linear_error(v, o);
  return o.result(v);
}

InferredType transpose_rule(const Graph &g, OpKind op, const Ids &inputs, const Attrs &attrs) {
  if (attrs.axes.size() != 2)
    internal_error("transpose needs two axes");
  Operands o(g, inputs, 1);
  Verdict v = shape::transpose(o.views, attrs.axes[0], attrs.axes[1]);
  if (v.broken == Rule::axis_in_range) // the compiled ops move float data; ids need none
    normalize_axis(attrs.axes[static_cast<std::size_t>(v.da)], o.node(0).rank(),
                   "transpose of " + q(o.node(0).name));
  return checked(v, cname(op), o);
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
  Operands ops(g, inputs, 1);
  Verdict v = shape::same_shape(ops.views);
  if (op == OpKind::Scale && !attrs.scale)
    internal_error("scale without a factor");
  if (op == OpKind::Softmax) {
    if (attrs.axes.size() != 1)
      internal_error("softmax needs one axis");
    v = shape::softmax(ops.views, attrs.axes[0]);
    if (v.broken == Rule::axis_in_range)
      normalize_axis(attrs.axes[0], ops.node(0).rank(), "softmax of " + q(ops.node(0).name));
  }
  if (op == OpKind::SinusoidalPE) {
    if (v.ok())
      check_position_attrs(o, attrs);
    v = shape::same_shape_rank(ops.views, 2);
    if (v.broken == Rule::rank_at_least_2)
      expect_rank_at_least(ops.node(0), 2, o,
                           "it adds positions over the last two (position, feature)");
  }
  return checked(v, o, ops);
}

/// add, sub, mul, div: the shorter operand's dims must end the longer's.
InferredType broadcast_rule(const Graph &g, OpKind op, const Ids &inputs, const Attrs &) {
  Operands o(g, inputs, 2);
  Verdict v = shape::broadcast(o.views);
  if (v.broken == Rule::shorter_shape_ends_longer)
    user_error(std::string(cname(op)) + ": shapes do not match: " + who(o.node(0)) + " and " +
               who(o.node(1)) + " (they must be equal, or the shorter must end the longer)");
  return checked(v, cname(op), o);
}

[[noreturn]] void split_heads_error(const Verdict &v, const Operands &o) {
  const Node &x = o.node(0);
  const Dim &h = o.given[0], &dh = o.given[1], &last = x.dims.back();
  Dim prod = product(h, dh);
  switch (v.broken) {
  case Rule::rank_at_least_2:
    expect_rank_at_least(x, 2, "split_heads", "split_heads needs (..., L, H*Dh)");
    break;
  case Rule::split_heads_heads_are_static:
    user_error("split_heads: the heads dim " + describe(h) + " must be static and positive");
  case Rule::split_heads_last_dim_is_heads_times_head_dim:
    if (last.is_dynamic())
      user_error("split_heads: " + who(x) + " ends in " + describe(last) +
                 ", which is dynamic; split_heads needs a static last dim (or one named " +
                 prod.name + ")");
    user_error("split_heads: " + who(x) + " ends in " + describe(last) +
               ", which cannot split into " + describe(h) + " heads of " + describe(dh) +
               (prod.is_static() ? " (" + std::to_string(prod.extent) +
                                       " != " + std::to_string(last.extent) + ")"
                                 : std::string()));
  default: break;
  }
  common_error(v, "split_heads", o);
}

InferredType split_heads_rule(const Graph &g, OpKind, const Ids &inputs, const Attrs &attrs) {
  if (attrs.dims.size() != 2)
    internal_error("split_heads needs heads and head_dim");
  Operands o(g, inputs, 1, attrs.dims);
  Verdict v = shape::split_heads(o.views, o.given_views);
  if (!v.ok())
    split_heads_error(v, o);
  return o.result(v);
}

InferredType merge_heads_rule(const Graph &g, OpKind, const Ids &inputs, const Attrs &attrs) {
  Operands o(g, inputs, 1, attrs.dims);
  Verdict v = shape::merge_heads(o.views, o.given_views);
  const Node &x = o.node(0);
  if (v.broken == Rule::rank_at_least_3)
    expect_rank_at_least(x, 3, "merge_heads", "merge_heads needs (..., H, L, Dh)");
  if (v.broken == Rule::merge_heads_out_is_heads_times_head_dim) {
    const Dim &h = x.dims[x.dims.size() - 3], &dh = x.dims.back();
    Dim out_dim = product(h, dh);
    user_error("merge_heads: " + who(x) + " merges " + describe(h) + " heads of " + describe(dh) +
               " into " + (out_dim.is_static() ? std::to_string(out_dim.extent) : out_dim.name) +
               " features, which is not " + describe(o.given[0]));
  }
  return checked(v, "merge_heads", o);
}

[[noreturn]] void concat_error(const Verdict &v, const Operands &o, std::int64_t axis) {
  const Node &first = o.node(0);
  switch (v.broken) {
  case Rule::axis_in_range: normalize_axis(axis, first.rank(), "concat of " + q(first.name)); break;
  case Rule::ranks_equal:
    user_error("concat: " + who(first) + " and " + who(o.node(v.b)) +
               " have different numbers of dims");
  case Rule::concat_dims_off_the_axis_match:
    user_error("concat: along axis " + std::to_string(shape::normalize_axis(axis, first.rank())) +
               ", the other dims must match: " + who(first) + " has " + describe(o.dim(0, v.da)) +
               ", " + who(o.node(v.b)) + " has " + describe(o.dim(v.b, v.db)));
  case Rule::concat_out_is_sum_of_parts: {
    std::vector<Dim> parts;
    for (const Node *n : o.nodes)
      parts.push_back(n->dims[static_cast<std::size_t>(v.da)]);
    user_error("concat: the parts add up to " + describe(sum(parts)) + ", which is not " +
               describe(o.given[0]));
  }
  default: break;
  }
  common_error(v, "concat", o);
}

InferredType concat_rule(const Graph &g, OpKind, const Ids &inputs, const Attrs &attrs) {
  if (inputs.empty())
    user_error("concat: needs at least one tensor");
  if (attrs.axes.size() != 1)
    internal_error("concat needs one axis");
  Operands o(g, inputs, inputs.size(), attrs.dims);
  Verdict v = shape::concat(o.views, attrs.axes[0], o.given_views);
  if (!v.ok())
    concat_error(v, o, attrs.axes[0]);
  return o.result(v);
}

/// mask, score_mod: scores (L, S), (H, L, S) or (B, H, L, S), then the captured tensors.
InferredType mod_rule(const Graph &g, OpKind op, const Ids &inputs, const Attrs &attrs) {
  const char *o = cname(op);
  Operands ops(g, inputs, 1);
  Verdict v = shape::scores(ops.views);
  if (v.broken == Rule::rank_2_to_4)
    user_error(std::string(o) + ": scores " + who(ops.node(0)) +
               " must have 2 (L, S), 3 (H, L, S) or 4 (B, H, L, S) dims");
  InferredType t = checked(v, o, ops);
  bool is_mask = op == OpKind::Mask;
  const ExprPtr &e = is_mask ? attrs.mask : attrs.score;
  if (!e)
    internal_error(std::string(o) + " without an expression");
  check_mod(g, e, is_mask, inputs, 1, o);
  return t;
}

[[noreturn]] void rope_error(const Verdict &v, const Operands &o) {
  const Node &x = o.node(0);
  switch (v.broken) {
  case Rule::rank_at_least_2: expect_rank_at_least(x, 2, "rope", "rope needs (..., L, Dh)"); break;
  case Rule::rope_last_dim_is_static_and_even:
    user_error("rope: " + who(x) + " ends in " + describe(x.dims.back()) +
               "; rope rotates pairs of features and needs a static, even last dim");
  case Rule::is_integer_tensor:
    user_error("rope: positions " + who(o.node(1)) + " must be i32 or i64, got " +
               std::string(dtype_name(o.node(1).dtype)));
  case Rule::rope_positions_match_rows:
    user_error("rope: positions " + who(o.node(1)) + " must be (" + x.dims[x.dims.size() - 2].name +
               ") or (" + x.dims[0].name + ", " + x.dims[x.dims.size() - 2].name + ") for " +
               who(x));
  default: break;
  }
  common_error(v, "rope", o);
}

InferredType rope_rule(const Graph &g, OpKind op, const Ids &inputs, const Attrs &attrs) {
  check_position_attrs(cname(op), attrs);
  Operands o(g, inputs, 2);
  Verdict v = shape::rope(o.views);
  if (!v.ok())
    rope_error(v, o);
  if (inputs.size() == 2 && attrs.offset != 0)
    user_error("rope: positions and an offset cannot be combined");
  return o.result(v);
}

/// layer_norm (x, gamma, beta), rms_norm (x, gamma): over the last dim.
InferredType norm_rule(const Graph &g, OpKind op, const Ids &inputs, const Attrs &attrs) {
  const char *o = cname(op);
  if (!(attrs.eps >= 0))
    user_error(std::string(o) + ": eps must not be negative");
  Operands ops(g, inputs, 3);
  Verdict v = shape::norm(ops.views);
  const Node &x = ops.node(0);
  if (v.broken == Rule::rank_at_least_1)
    expect_rank_at_least(x, 1, o, "it normalises over the last dim");
  if (v.broken == Rule::norm_param_is_last_dim)
    user_error(std::string(o) + ": " + (v.a == 1 ? "gamma " : "beta ") + who(ops.node(v.a)) +
               " must be (" + x.dims.back().name + "), the last dim of " + who(x));
  return checked(v, o, ops);
}

InferredType embedding_rule(const Graph &g, OpKind, const Ids &inputs, const Attrs &) {
  Operands o(g, inputs, 2);
  Verdict v = shape::embedding(o.views);
  const Node &ids = o.node(0), &table = o.node(1);
  if (v.broken == Rule::is_integer_tensor)
    user_error("embedding: ids " + who(ids) + " must be i32 or i64, got " +
               std::string(dtype_name(ids.dtype)));
  if (v.broken == Rule::rank_is_2)
    user_error("embedding: table " + who(table) + " must have 2 dims (vocab, features)");
  return checked(v, "embedding", o);
}

/// The heads rules of attention's message: grouped-query attention's counts.
[[noreturn]] void attention_heads_error(const Verdict &v, const Operands &o, const char *op) {
  const Node &qn = o.node(0), &kn = o.node(1), &vn = o.node(2);
  const Dim &hq = o.dim(0, v.da), &hk = o.dim(1, v.db);
  switch (v.broken) {
  case Rule::attention_heads_are_not_zero:
    user_error(std::string(op) + ": query and kv heads must not be 0: " + who(qn) + ", " + who(kn));
  case Rule::attention_k_v_heads_match:
    user_error(std::string(op) + ": k and v must have the same heads: " + q(kn.name) + " has " +
               describe(hk) + ", " + q(vn.name) + " has " + describe(o.dim(2, v.db)));
  case Rule::attention_grouped_heads_are_static:
    user_error(std::string(op) + ": q has heads " + describe(hq) + " and k has heads " +
               describe(hk) + "; grouped-query attention needs both head counts static");
  default:
    user_error(std::string(op) + ": " + std::to_string(hq.extent) + " query heads " + describe(hq) +
               " cannot share " + std::to_string(hk.extent) + " kv heads " + describe(hk) +
               " (grouped-query attention needs a whole number of query heads per kv head)");
  }
}

[[noreturn]] void attention_error(const Verdict &v, const Operands &o, const char *op) {
  const Node &qn = o.node(0), &kn = o.node(1), &vn = o.node(2);
  std::string s(op);
  switch (v.broken) {
  case Rule::rank_2_to_4:
    user_error(s + ": " + who(o.node(v.a)) +
               " must have 2 (L, Dh), 3 (H, L, Dh) or 4 (B, H, L, Dh) dims");
  case Rule::ranks_equal:
    user_error(s + ": q, k and v must have the same number of dims: " + who(qn) + ", " + who(kn) +
               ", " + who(vn));
  case Rule::attention_q_k_head_dims_match:
    user_error(s + ": q and k must share the head dim: " + q(qn.name) + " ends in " +
               describe(qn.dims.back()) + ", " + q(kn.name) + " in " + describe(kn.dims.back()));
  case Rule::attention_k_v_seq_dims_match:
    user_error(s + ": k and v must share the sequence dim: " + q(kn.name) + " has " +
               describe(o.dim(1, v.da)) + ", " + q(vn.name) + " has " + describe(o.dim(2, v.db)));
  case Rule::attention_batch_dims_match:
    user_error(s + ": q, k and v must share the batch dim: " + who(qn) + ", " + who(kn) + ", " +
               who(vn));
  case Rule::attention_heads_are_not_zero:
  case Rule::attention_k_v_heads_match:
  case Rule::attention_grouped_heads_are_static:
  case Rule::attention_query_heads_are_a_multiple_of_kv_heads: attention_heads_error(v, o, op);
  default: break;
  }
  common_error(v, op, o);
}

InferredType attention_like(const Graph &g, const Ids &inputs, const char *op) {
  Operands o(g, inputs, 3);
  Verdict v = shape::attention(o.views);
  if (!v.ok())
    attention_error(v, o, op);
  return o.result(v);
}

InferredType attention_rule(const Graph &g, OpKind op, const Ids &inputs, const Attrs &attrs) {
  const char *o = cname(op);
  InferredType t = attention_like(g, inputs, o);
  check_mod(g, attrs.mask, true, inputs, 3, o);
  check_mod(g, attrs.score, false, inputs, 3, o);
  if (attrs.scale && !(*attrs.scale == *attrs.scale))
    user_error("attention: scale is NaN");
  return t;
}

/// attention_lse: one attention node (f32 or f64) -> its (..., Hq, L).
InferredType attention_lse_rule(const Graph &g, OpKind op, const Ids &inputs, const Attrs &) {
  const Node &a = in(g, inputs, 0, cname(op));
  if (a.op != OpKind::Attention)
    user_error("attention_lse: " + who(a) + " is a " + std::string(op_name(a.op)) +
               ", not an attention (call .lse() on what attention() returns)");
  Operands o(g, inputs, 1);
  Verdict v = shape::attention_lse(o.views);
  if (v.broken == Rule::lse_attention_is_f32_or_f64)
    user_error("attention_lse: attention " + who(a) + " is " + std::string(dtype_name(a.dtype)) +
               "; the log-sum-exp is computed for f32 and f64 attention only");
  return checked(v, "attention_lse", o);
}

/// merge_attention (oa, la, ob, lb): two partials of the same rows.
InferredType merge_rule(const Graph &g, OpKind, const Ids &inputs, const Attrs &) {
  Operands ops(g, inputs, inputs.size());
  Verdict v = shape::merge_attention(ops.views);
  const Node &la = ops.node(1), &lb = ops.node(3);
  if (v.broken == Rule::same_dims)
    user_error("merge_attention: the log-sum-exps " + who(la) + " and " + who(lb) +
               " must have the same dims");
  if (v.broken == Rule::merge_outputs_dims_match)
    user_error("merge_attention: the partial outputs " + who(ops.node(0)) + " and " +
               who(ops.node(2)) + " must have the same dims");
  if (v.broken == Rule::merge_lse_is_output_rows)
    user_error("merge_attention: the partial output " + who(ops.node(0)) +
               " must be its log-sum-exp's dims " + describe(la.dims) + " and one more (Dv); " +
               q(la.name) + " does not fit");
  return checked(v, "merge_attention", ops);
}

/// The ops of QKV_TENSOR_PAIR_OPS: the list's rule, words from the rule's sentence.
template <auto rule>
InferredType pair_rule(const Graph &g, OpKind op, const Ids &inputs, const Attrs &) {
  Operands o(g, inputs, 2);
  return checked(rule(o.views), cname(op), o);
}

/// The ops of QKV_SCALAR_ACTIVATIONS: one float tensor's dims (unary_rule), and the
/// attribute, kept in Attrs::alpha and named by the row, within `range`.
template <ScalarRange range>
InferredType scalar_rule(const Graph &g, OpKind op, const Ids &inputs, const Attrs &attrs) {
  InferredType t = unary_rule(g, op, inputs, attrs);
  double v = attrs.alpha;
  bool positive = range == ScalarRange::Positive;
  if (!std::isfinite(v) || (positive && !(v > 0))) {
    user_error(std::string(cname(op)) + " of " + q(g.node(inputs[0]).name) + ": " +
               std::string(op_info(op).attrs[0].label) + " must be a finite number" +
               (positive ? " above 0" : "") + ", not " + format_double(v));
  }
  return t;
}

InferredType linear_attention_rule(const Graph &g, OpKind op, const Ids &inputs, const Attrs &) {
  return attention_like(g, inputs, cname(op));
}

[[noreturn]] void cache_view_error(const Verdict &v, const Operands &o, bool paged) {
  std::string name = paged ? "paged_cache_view" : "cache_view";
  const Node &store = o.node(0), &fresh = o.node(paged ? 3 : 2);
  const Dim &b = fresh.dims.empty() ? unknown_dim() : fresh.dims[0];
  switch (v.broken) {
  case Rule::rank_is_4:
    user_error(name + ": " + who(store) + " and " + who(fresh) + " must have 4 dims (" +
               (paged ? "pages, Hkv, page, Dh) and (B, Hkv, n, Dh)" : "B, Hkv, C, Dh)"));
  case Rule::cache_heads_and_head_dim_match:
    user_error(name + ": " + who(store) + " and " + who(fresh) +
               " must share kv heads (dim 1) and head dim (dim 3)");
  case Rule::cache_lengths_are_batch:
    user_error(name + ": lengths " + who(o.node(v.a)) + " must be an i32 or i64 (" + b.name + ")");
  case Rule::cache_batch_dims_match:
    user_error(name + ": " + who(store) + " and " + who(fresh) + " must share the batch dim");
  case Rule::paged_cache_table_is_batch:
    user_error(name + ": table " + who(o.node(1)) + " must be an i32 or i64 (" + b.name +
               ", pages per sequence)");
  default: break;
  }
  common_error(v, name.c_str(), o);
}

/// cache_view(past, lengths, fresh), paged_cache_view(pool, table, lengths, fresh).
InferredType cache_view_rule(const Graph &g, OpKind op, const Ids &inputs, const Attrs &) {
  Operands o(g, inputs, inputs.size());
  Verdict v = shape::cache_view(o.views);
  if (!v.ok())
    cache_view_error(v, o, op == OpKind::PagedCacheView);
  return o.result(v);
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
    {OpKind::Transpose,
     "transpose",
     1,
     1,
     kAny,
     {{{F::Axes, "axes"}}},
     {{{"axis_a", F::Axes, 0}, {"axis_b", F::Axes, 1}}},
     true,
     kExact,
     transpose_rule},
    {OpKind::Scale,
     "scale",
     1,
     1,
     kAny,
     {{{F::Scale, "scale"}}},
     {{{"factor", F::Scale}}},
     false,
     kExact,
     unary_rule},
#define QKV_BINARY_ROW(kind, builder, bound, summary)                                          \
  {OpKind::kind, #builder, 2, 2, kAny, {}, {}, false, {B::bound}, broadcast_rule},
    QKV_BROADCAST_BINARY(QKV_BINARY_ROW)
#undef QKV_BINARY_ROW
        {OpKind::Softmax,
         "softmax",
         1,
         1,
         kAny,
         {{{F::Axes, "axis", AttrStyle::First}}},
         {{{"axis", F::Axes}}},
         false,
         {B::AxisSoftmax},
         unary_rule},
    {OpKind::SplitHeads,
     "split_heads",
     1,
     1,
     kAny,
     {{{F::Dims, "heads"}}},
     {{{"heads", F::Dims}}},
     true,
     kExact,
     split_heads_rule},
    {OpKind::MergeHeads,
     "merge_heads",
     1,
     1,
     kAny,
     {{{F::Dims, "out"}}},
     {},
     true,
     kExact,
     merge_heads_rule},
    {OpKind::Concat,
     "concat",
     0,
     kAny,
     kAny,
     {{{F::Axes, "axis", AttrStyle::First}, {F::Dims, "out"}}},
     {{{"axis", F::Axes}}},
     true,
     kExact,
     concat_rule},
    {OpKind::Mask, "mask", 1, kAny, 1, {{{F::Mask, "mask"}}}, {}, false, kExact, mod_rule},
    {OpKind::ScoreMod,
     "score_mod",
     1,
     kAny,
     1,
     {{{F::Score, "score"}}},
     {},
     false,
     {B::LargestResult},
     mod_rule},
    {OpKind::SinusoidalPE,
     "sinusoidal_pe",
     1,
     1,
     kAny,
     {{{F::Base, "base"}, {F::Offset, "offset"}}},
     {{{"base", F::Base}, {"offset", F::Offset}}},
     false,
     {B::Positions},
     unary_rule},
    {OpKind::Rope,
     "rope",
     1,
     2,
     kAny,
     {{{F::Base, "base"}, {F::Offset, "offset"}, {F::Interleaved, "interleaved"}}},
     {{{"base", F::Base}, {"offset", F::Offset}, {"interleaved", F::Interleaved}}},
     false,
     {B::Positions},
     rope_rule},
    {OpKind::LayerNorm,
     "layer_norm",
     1,
     3,
     kAny,
     {{{F::Eps, "eps"}}},
     {{{"eps", F::Eps}}},
     false,
     {B::CenteredNorm},
     norm_rule},
    {OpKind::RmsNorm,
     "rms_norm",
     1,
     2,
     kAny,
     {{{F::Eps, "eps"}}},
     {{{"eps", F::Eps}}},
     false,
     {B::Norm},
     norm_rule},
    {OpKind::Gelu,
     "gelu",
     1,
     1,
     kAny,
     {{{F::Approximate, "approximate", AttrStyle::TanhOrNone}}},
     {{{"approximate", F::Approximate}}},
     false,
     kLargestOperand,
     unary_rule},
#define QKV_SCALAR_ROW(kind, builder, attribute, default_value, range, bound, summary)          \
  {OpKind::kind, #builder, 1, 1, kAny, {{{F::Alpha, #attribute}}}, {{{#attribute, F::Alpha}}},    \
   false, {B::bound}, scalar_rule<ScalarRange::range>},
    QKV_SCALAR_ACTIVATIONS(QKV_SCALAR_ROW)
#undef QKV_SCALAR_ROW
#define QKV_ACTIVATION_ROW(kind, builder, bound, summary)                                      \
  {OpKind::kind, #builder, 1, 1, kAny, {}, {}, false, {B::OperandPlus, bound}, unary_rule},
    QKV_PLAIN_ACTIVATIONS(QKV_ACTIVATION_ROW)
#undef QKV_ACTIVATION_ROW
#define QKV_PAIR_ROW(kind, builder, a, b, rule, bound, summary)                                    \
  {OpKind::kind, #builder, 2, 2, kAny, {}, {}, false, {B::bound}, pair_rule<shape::rule>},
        QKV_TENSOR_PAIR_OPS(QKV_PAIR_ROW)
#undef QKV_PAIR_ROW
            {OpKind::Embedding, "embedding", 2, 2, kAny, {}, {}, true, kExact, embedding_rule},
    {OpKind::Attention,
     "attention",
     3,
     kAny,
     3,
     {{{F::Scale, "scale"}, {F::Mask, "mask"}, {F::Score, "score"}}},
     {{{"scale", F::Scale}}},
     false,
     {B::Attention},
     attention_rule},
    {OpKind::LinearAttention,
     "linear_attention",
     3,
     3,
     kAny,
     {{{F::FeatureMap, "feature_map"}}},
     {{{"feature_map", F::FeatureMap}}},
     false,
     {B::LinearAttention},
     linear_attention_rule},
    {OpKind::CacheView, "cache_view", 3, 3, kAny, {}, {}, true, kExact, cache_view_rule},
    {OpKind::PagedCacheView, "paged_cache_view", 4, 4, kAny, {}, {}, true, kExact, cache_view_rule},
    // The attention it reads adds its own bound; the log adds its result's magnitude.
    {OpKind::AttentionLse,
     "attention_lse",
     1,
     1,
     kAny,
     {},
     {},
     false,
     {B::LargestResult},
     attention_lse_rule},
    {OpKind::MergeAttention,
     "merge_attention",
     4,
     4,
     kAny,
     {},
     {},
     false,
     {B::LseMerge},
     merge_rule},
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
