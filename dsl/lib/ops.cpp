// Op builders and their shape rules (infer_type). Every message names the op, the user's
// tensors and the dims, in the form `'Dh'(64)`.
#include <qkv/dsl/infer.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

namespace qkv {

namespace {

std::string q(const std::string &s) { return "'" + s + "'"; }

/// 'x' (B, L, D)
std::string who(const Node &n) { return q(n.name) + " " + describe(n.dims); }

const Node &in(const Graph &g, const std::vector<NodeId> &inputs, std::size_t i, const char *op) {
  if (i >= inputs.size())
    internal_error(std::string(op) + ": missing input " + std::to_string(i));
  return g.node(inputs[i]);
}

void expect_inputs(const std::vector<NodeId> &inputs, std::size_t lo, std::size_t hi,
                   const char *op) {
  if (inputs.size() < lo || inputs.size() > hi)
    internal_error(std::string(op) + ": " + std::to_string(inputs.size()) + " inputs");
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

bool same_dim(const Dim &a, const Dim &b) { return a.name == b.name; }

/// A derived dim (H*Dh, a+b) matches a dim by static extent when both are static, else by
/// name: a dim named H*Dh whose extent is not the product does not split into these parts.
bool derived_dim_matches(const Dim &derived, const Dim &d) {
  if (derived.is_static() && d.is_static())
    return derived.extent == d.extent;
  return derived.name == d.name;
}

bool same_dims(const std::vector<Dim> &a, const std::vector<Dim> &b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), same_dim);
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
    if (!same_dim(hk, vn.dims[r - 3]))
      user_error(std::string(op) + ": k and v must have the same heads: " + q(kn.name) + " has " +
                 describe(hk) + ", " + q(vn.name) + " has " + describe(vn.dims[r - 3]));
    if (!same_dim(hq, hk)) {
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
  expect_inputs(inputs, paged ? 4 : 3, paged ? 4 : 3, o);
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

} // namespace

int normalize_axis(std::int64_t axis, int rank, const std::string &what) {
  std::int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank)
    user_error(what + ": axis " + std::to_string(axis) + " is out of range for " +
               std::to_string(rank) + " dims");
  return static_cast<int>(a);
}

int Node::num_operands() const {
  switch (op) {
  case OpKind::Attention: return 3;
  case OpKind::Mask:
  case OpKind::ScoreMod: return 1;
  default: return static_cast<int>(inputs.size());
  }
}

InferredType infer_type(const Graph &g, OpKind op, const std::vector<NodeId> &inputs,
                        const Attrs &attrs) {
  const std::string name(op_name(op));
  const char *o = name.c_str();
  switch (op) {
  case OpKind::Input:
  case OpKind::Param:
  case OpKind::Constant: internal_error("infer_type on a leaf");

  case OpKind::MatMul: {
    expect_inputs(inputs, 2, 2, o);
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

  case OpKind::Linear: {
    expect_inputs(inputs, 2, 3, o);
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

  case OpKind::Transpose: {
    expect_inputs(inputs, 1, 1, o);
    const Node &x = in(g, inputs, 0, o);
    expect_float(x, o); // the compiled ops move float data; ids need no transposing
    if (attrs.axes.size() != 2)
      internal_error("transpose needs two axes");
    int a = normalize_axis(attrs.axes[0], x.rank(), "transpose of " + q(x.name));
    int b = normalize_axis(attrs.axes[1], x.rank(), "transpose of " + q(x.name));
    std::vector<Dim> out = x.dims;
    std::swap(out[a], out[b]);
    return {x.dtype, out};
  }

  case OpKind::Scale:
  case OpKind::Gelu:
  case OpKind::Silu:
  case OpKind::Elu:
  case OpKind::Softmax:
  case OpKind::SinusoidalPE: {
    expect_inputs(inputs, 1, 1, o);
    const Node &x = in(g, inputs, 0, o);
    expect_float(x, o);
    if (op == OpKind::Scale && !attrs.scale)
      internal_error("scale without a factor");
    if (op == OpKind::Softmax) {
      if (attrs.axes.size() != 1)
        internal_error("softmax needs one axis");
      normalize_axis(attrs.axes[0], x.rank(), "softmax of " + q(x.name));
    }
    if (op == OpKind::SinusoidalPE)
      expect_rank_at_least(x, 2, o, "it adds positions over the last two (position, feature)");
    return {x.dtype, x.dims};
  }

  case OpKind::Add:
  case OpKind::Sub:
  case OpKind::Mul:
  case OpKind::Div: {
    expect_inputs(inputs, 2, 2, o);
    const Node &a = in(g, inputs, 0, o), &b = in(g, inputs, 1, o);
    expect_float(a, o);
    expect_same_dtype(a, b, o);
    const Node &lng = a.rank() >= b.rank() ? a : b, &sht = a.rank() >= b.rank() ? b : a;
    std::vector<Dim> tail = slice(lng.dims, lng.rank() - sht.rank(), lng.rank());
    if (!same_dims(tail, sht.dims))
      user_error(name + ": shapes do not match: " + who(a) + " and " + who(b) +
                 " (they must be equal, or the shorter must end the longer)");
    return {a.dtype, lng.dims};
  }

  case OpKind::SplitHeads: {
    expect_inputs(inputs, 1, 1, o);
    const Node &x = in(g, inputs, 0, o);
    expect_float(x, o);
    expect_rank_at_least(x, 2, o, "split_heads needs (..., L, H*Dh)");
    if (attrs.dims.size() != 2)
      internal_error("split_heads needs heads and head_dim");
    const Dim &h = attrs.dims[0], &dh = attrs.dims[1];
    const Dim &last = x.dims.back();
    Dim prod = product(h, dh);
    bool ok = derived_dim_matches(prod, last);
    if (!ok) {
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

  case OpKind::MergeHeads: {
    expect_inputs(inputs, 1, 1, o);
    const Node &x = in(g, inputs, 0, o);
    expect_float(x, o);
    expect_rank_at_least(x, 3, o, "merge_heads needs (..., H, L, Dh)");
    int r = x.rank();
    const Dim &h = x.dims[r - 3], &dh = x.dims[r - 1];
    Dim out_dim = product(h, dh);
    if (!attrs.dims.empty()) {
      const Dim &want = attrs.dims[0];
      bool ok = derived_dim_matches(out_dim, want);
      if (!ok)
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

  case OpKind::Concat: {
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
          user_error("concat: along axis " + std::to_string(ax) +
                     ", the other dims must match: " + who(first) + " has " +
                     describe(first.dims[d]) + ", " + who(x) + " has " + describe(x.dims[d]));
      parts.push_back(x.dims[ax]);
    }
    Dim joined = sum(parts);
    if (!attrs.dims.empty()) {
      const Dim &want = attrs.dims[0];
      bool ok = derived_dim_matches(joined, want);
      if (!ok)
        user_error("concat: the parts add up to " + describe(joined) + ", which is not " +
                   describe(want));
      joined = want;
    }
    std::vector<Dim> out = first.dims;
    out[ax] = joined;
    return {first.dtype, out};
  }

  case OpKind::Mask:
  case OpKind::ScoreMod: {
    if (inputs.empty())
      internal_error("mask/score_mod without scores");
    const Node &s = in(g, inputs, 0, o);
    expect_float(s, o);
    if (s.rank() < 2 || s.rank() > 4)
      user_error(name + ": scores " + who(s) +
                 " must have 2 (L, S), 3 (H, L, S) or 4 (B, H, L, S) dims");
    bool is_mask = op == OpKind::Mask;
    const ExprPtr &e = is_mask ? attrs.mask : attrs.score;
    if (!e)
      internal_error(name + " without an expression");
    check_mod(g, e, is_mask, inputs, 1, o);
    return {s.dtype, s.dims};
  }

  case OpKind::Rope: {
    expect_inputs(inputs, 1, 2, o);
    const Node &x = in(g, inputs, 0, o);
    expect_float(x, o);
    expect_rank_at_least(x, 2, o, "rope needs (..., L, Dh)");
    const Dim &d = x.dims.back();
    if (d.is_dynamic() || d.extent % 2 != 0)
      user_error("rope: " + who(x) + " ends in " + describe(d) +
                 "; rope rotates pairs of features and needs a static, even last dim");
    if (inputs.size() == 2)
      check_rope_positions(x, in(g, inputs, 1, o));
    return {x.dtype, x.dims};
  }

  case OpKind::LayerNorm:
  case OpKind::RmsNorm: {
    expect_inputs(inputs, 1, 3, o);
    const Node &x = in(g, inputs, 0, o);
    expect_float(x, o);
    expect_rank_at_least(x, 1, o, "it normalises over the last dim");
    for (std::size_t i = 1; i < inputs.size(); ++i) {
      const Node &p = in(g, inputs, i, o);
      expect_same_dtype(x, p, o);
      if (p.rank() != 1 || !same_dim(p.dims[0], x.dims.back()))
        user_error(name + ": " + (i == 1 ? "gamma " : "beta ") + who(p) + " must be (" +
                   x.dims.back().name + "), the last dim of " + who(x));
    }
    return {x.dtype, x.dims};
  }

  case OpKind::Swiglu: {
    expect_inputs(inputs, 2, 2, o);
    const Node &a = in(g, inputs, 0, o), &b = in(g, inputs, 1, o);
    expect_float(a, o);
    expect_same_dtype(a, b, o);
    if (!same_dims(a.dims, b.dims))
      user_error("swiglu: gate " + who(a) + " and up " + who(b) + " must have the same dims");
    return {a.dtype, a.dims};
  }

  case OpKind::Embedding: {
    expect_inputs(inputs, 2, 2, o);
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

  case OpKind::Attention: {
    if (inputs.size() < 3)
      internal_error("attention needs q, k, v");
    InferredType t = infer_attention_like(g, inputs, o);
    check_mod(g, attrs.mask, true, inputs, 3, o);
    check_mod(g, attrs.score, false, inputs, 3, o);
    if (attrs.scale && !(*attrs.scale == *attrs.scale))
      user_error("attention: scale is NaN");
    return t;
  }

  case OpKind::CacheView:
  case OpKind::PagedCacheView: return infer_cache_view(g, op, inputs);

  case OpKind::LinformerProject: {
    expect_inputs(inputs, 2, 2, o);
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

  case OpKind::LinearAttention: {
    expect_inputs(inputs, 3, 3, o);
    return infer_attention_like(g, inputs, o);
  }
  }
  internal_error("infer_type: unknown op");
}

// ---- builders -------------------------------------------------------------------------

namespace {

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

Value add(Value a, Value b) { return binary(OpKind::Add, a, b); }
Value sub(Value a, Value b) { return binary(OpKind::Sub, a, b); }
Value mul(Value a, Value b) { return binary(OpKind::Mul, a, b); }
Value div(Value a, Value b) { return binary(OpKind::Div, a, b); }

Value residual(Value x, Value y) {
  graph_of("residual", {x, y});
  if (!same_dims(x.dims(), y.dims()))
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
  user_check(base > 0, "sinusoidal_pe: base must be positive");
  user_check(offset >= 0, "sinusoidal_pe: offset must not be negative");
  Attrs a;
  a.base = base;
  a.offset = offset;
  return unary(OpKind::SinusoidalPE, x, a);
}

Value rope(Value x, RopeOptions opts) {
  user_check(opts.base > 0, "rope: base must be positive");
  user_check(opts.offset >= 0, "rope: offset must not be negative");
  Attrs a;
  a.base = opts.base;
  a.interleaved = opts.interleaved;
  a.offset = opts.offset;
  return unary(OpKind::Rope, x, a);
}

Value rope(Value x, Value positions, RopeOptions opts) {
  graph_of("rope", {x, positions});
  user_check(opts.base > 0, "rope: base must be positive");
  user_check(opts.offset == 0, "rope: positions and an offset cannot be combined");
  Attrs a;
  a.base = opts.base;
  a.interleaved = opts.interleaved;
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
  user_check(eps >= 0, "layer_norm: eps must not be negative");
  Attrs a;
  a.eps = eps;
  return unary(OpKind::LayerNorm, x, a);
}

Value layer_norm(Value x, Value gamma, Value beta, double eps) {
  graph_of("layer_norm", {x, gamma, beta});
  user_check(eps >= 0, "layer_norm: eps must not be negative");
  Attrs a;
  a.eps = eps;
  a.has_gamma = a.has_beta = true;
  return build(OpKind::LayerNorm, {x, gamma, beta}, a);
}

Value rms_norm(Value x, double eps) {
  user_check(eps >= 0, "rms_norm: eps must not be negative");
  Attrs a;
  a.eps = eps;
  return unary(OpKind::RmsNorm, x, a);
}

Value rms_norm(Value x, Value gamma, double eps) {
  graph_of("rms_norm", {x, gamma});
  user_check(eps >= 0, "rms_norm: eps must not be negative");
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

Value silu(Value x) { return unary(OpKind::Silu, x); }

Value elu(Value x, double alpha) {
  Attrs a;
  a.alpha = alpha;
  return unary(OpKind::Elu, x, a);
}

Value swiglu(Value gate, Value up) { return binary(OpKind::Swiglu, gate, up); }
Value embedding(Value ids, Value table) { return binary(OpKind::Embedding, ids, table); }
Value linformer_project(Value x, Value e) { return binary(OpKind::LinformerProject, x, e); }

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
