// The reference interpreter: one eval_<op> per OpKind, double precision, plain loops.
//
// Every node's value is an f64 tensor whose shape is the node's dims resolved under the
// dim bindings of the call. The loops are written for clarity, not speed: this file is
// the definition of what each op computes, and each eval function states the choices a
// compiled kernel must reproduce.
#include <qkv/runtime/interpreter.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <numbers>
#include <optional>

#include <qkv/dsl/infer.hpp>

#include "bounds_messages.hpp"

namespace qkv::reference {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

using detail::shape_str;

/// Product of the extents in [from, to).
std::int64_t extent(const Shape &s, int from, int to) {
  std::int64_t n = 1;
  for (int i = from; i < to; ++i)
    n *= s[i];
  return n;
}

/// An integer-valued double, printed without a fraction or UB for huge values.
std::string int_str(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}


/// What an eval function sees: the graph, the node, the dim bindings and the values of
/// all earlier nodes (as doubles, row-major).
struct Ctx {
  const Graph &g;
  const Node &n;
  const DimBindings &dims;
  const std::vector<Tensor> &vals;
  const TensorMap &inputs;

  const Tensor &in(std::size_t i) const { return vals[n.inputs.at(i)]; }
  const double *ptr(std::size_t i) const { return in(i).data_as<double>(); }
  const Shape &shape(std::size_t i) const { return in(i).shape(); }
  const Node &in_node(std::size_t i) const { return g.node(n.inputs.at(i)); }
  Shape out_shape() const { return resolve(n.dims, dims); }
  /// attention 'attn#7': how errors name the op node.
  std::string who() const { return std::string(op_name(n.op)) + " '" + n.name + "'"; }
};

Tensor make_out(const Ctx &c) {
  try {
    return Tensor(DType::F64, c.out_shape());
  } catch (const Error &e) {
    user_error("interpreter: the result of " + c.who() + " of graph '" + c.g.name() + "': " +
               e.what());
  }
}
double *out_ptr(Tensor &t) { return t.data_as<double>(); }

// ---- mod expressions ----------------------------------------------------------------------

/// The point a mod is evaluated at.
struct ModPoint {
  std::int64_t b = 0, h = 0, q = 0, kv = 0, len_q = 0, len_kv = 0;
  double score = 0;
};

/// One value of an expression: the node's static type says which field holds it (bools
/// in `i` as 0/1).
struct Scalar {
  std::int64_t i = 0;
  double f = 0;
};

/// Evaluates mod expressions for one op node. Integer arithmetic is C++'s on int64
/// (division truncates toward zero, % takes the dividend's sign) except that overflow
/// wraps instead of being undefined; float arithmetic is IEEE double. Every operand is
/// evaluated: && and || do not short-circuit and select() evaluates both branches, as a
/// vectorised kernel does, so a load that a compiled kernel would perform out of bounds
/// is reported here even when its result would be discarded.
class ModEvaluator {
public:
  ModEvaluator(const Ctx &c, const char *which) : c_(c), which_(which) {}

  Scalar eval(const ExprNode &e, const ModPoint &p) const {
    switch (e.op) {
    case ExprOp::IndexB: return ival(p.b);
    case ExprOp::IndexH: return ival(p.h);
    case ExprOp::IndexQ: return ival(p.q);
    case ExprOp::IndexKV: return ival(p.kv);
    case ExprOp::LenQ: return ival(p.len_q);
    case ExprOp::LenKV: return ival(p.len_kv);
    case ExprOp::Score: return fval(p.score);
    case ExprOp::ConstInt:
    case ExprOp::ConstBool: return ival(e.ival);
    case ExprOp::ConstFloat: return fval(e.fval);
    case ExprOp::Neg: {
      Scalar a = arg(e, 0, p);
      return is_int(e) ? ival(wrap(0, a.i, std::minus<>())) : fval(-a.f);
    }
    case ExprOp::Not: return ival(!arg(e, 0, p).i);
    case ExprOp::Exp: return fval(std::exp(farg(e, 0, p)));
    case ExprOp::Log: return fval(std::log(farg(e, 0, p)));
    case ExprOp::Tanh: return fval(std::tanh(farg(e, 0, p)));
    case ExprOp::Sqrt: return fval(std::sqrt(farg(e, 0, p)));
    case ExprOp::Abs: {
      Scalar a = arg(e, 0, p);
      return is_int(e) ? ival(a.i < 0 ? wrap(0, a.i, std::minus<>()) : a.i) : fval(std::fabs(a.f));
    }
    case ExprOp::ToFloat: return fval(farg(e, 0, p));
    case ExprOp::Add:
    case ExprOp::Sub:
    case ExprOp::Mul:
    case ExprOp::Div:
    case ExprOp::Mod:
    case ExprOp::Min:
    case ExprOp::Max: return arith(e, arg(e, 0, p), arg(e, 1, p), p);
    case ExprOp::Pow: return fval(std::pow(farg(e, 0, p), farg(e, 1, p)));
    case ExprOp::Lt:
    case ExprOp::Le:
    case ExprOp::Gt:
    case ExprOp::Ge:
    case ExprOp::Eq:
    case ExprOp::Ne: return compare(e, p);
    case ExprOp::And: {
      Scalar a = arg(e, 0, p), b = arg(e, 1, p);
      return ival(a.i && b.i);
    }
    case ExprOp::Or: {
      Scalar a = arg(e, 0, p), b = arg(e, 1, p);
      return ival(a.i || b.i);
    }
    case ExprOp::Select: {
      Scalar cnd = arg(e, 0, p), a = arg(e, 1, p), b = arg(e, 2, p);
      return cnd.i ? a : b;
    }
    case ExprOp::Load: return load(e, p);
    }
    internal_error("mod evaluation: unknown expression op " + expr_op_name(e.op));
  }

  /// A score_mod's result as a double (a score_mod may return an integer expression).
  double number(const ExprNode &e, const ModPoint &p) const {
    Scalar v = eval(e, p);
    return e.type == ExprType::Float ? v.f : static_cast<double>(v.i);
  }
  /// A mask_mod's result.
  bool condition(const ExprNode &e, const ModPoint &p) const { return eval(e, p).i != 0; }

private:
  static Scalar ival(std::int64_t v) { return {v, 0}; }
  static Scalar fval(double v) { return {0, v}; }
  static bool is_int(const ExprNode &e) { return e.type != ExprType::Float; }
  template <class Op> static std::int64_t wrap(std::int64_t a, std::int64_t b, Op op) {
    return static_cast<std::int64_t>(
        op(static_cast<std::uint64_t>(a), static_cast<std::uint64_t>(b)));
  }

  Scalar arg(const ExprNode &e, std::size_t i, const ModPoint &p) const {
    return eval(*e.args.at(i), p);
  }
  /// Argument i as a double, whatever its type (ToFloat's conversion).
  double farg(const ExprNode &e, std::size_t i, const ModPoint &p) const {
    const ExprNode &a = *e.args.at(i);
    Scalar v = eval(a, p);
    return a.type == ExprType::Float ? v.f : static_cast<double>(v.i);
  }

  static std::string where(const ModPoint &p) {
    return detail::mod_position(detail::ModAt{p.b, p.h, p.q, p.kv});
  }

  Scalar arith(const ExprNode &e, Scalar a, Scalar b, const ModPoint &p) const {
    if (!is_int(e)) {
      switch (e.op) {
      case ExprOp::Add: return fval(a.f + b.f);
      case ExprOp::Sub: return fval(a.f - b.f);
      case ExprOp::Mul: return fval(a.f * b.f);
      case ExprOp::Div:
        return fval(a.f / b.f); // IEEE: x/0 is +-inf, 0/0 NaN
      // NaN-propagating, like torch.minimum / arith.minimumf.
      case ExprOp::Min: return fval(std::isnan(a.f) || std::isnan(b.f) ? kNaN : std::min(a.f, b.f));
      case ExprOp::Max: return fval(std::isnan(a.f) || std::isnan(b.f) ? kNaN : std::max(a.f, b.f));
      default: break;
      }
      internal_error("mod evaluation: float " + expr_op_name(e.op));
    }
    switch (e.op) {
    case ExprOp::Add: return ival(wrap(a.i, b.i, std::plus<>()));
    case ExprOp::Sub: return ival(wrap(a.i, b.i, std::minus<>()));
    case ExprOp::Mul: return ival(wrap(a.i, b.i, std::multiplies<>()));
    case ExprOp::Div:
    case ExprOp::Mod: {
      detail::ModAt at{p.b, p.h, p.q, p.kv};
      if (b.i == 0)
        user_error(detail::mod_division_error(c_.g, c_.n, which_, e, 0, at));
      if (a.i == std::numeric_limits<std::int64_t>::min() && b.i == -1) {
        // The quotient does not fit in int64 (undefined in C++, a trap on x86); the
        // remainder is mathematically 0.
        if (e.op == ExprOp::Mod)
          return ival(0);
        user_error(detail::mod_division_error(c_.g, c_.n, which_, e, -1, at));
      }
      return ival(e.op == ExprOp::Div ? a.i / b.i : a.i % b.i);
    }
    case ExprOp::Min: return ival(std::min(a.i, b.i));
    case ExprOp::Max: return ival(std::max(a.i, b.i));
    default: break;
    }
    internal_error("mod evaluation: integer " + expr_op_name(e.op));
  }

  Scalar compare(const ExprNode &e, const ModPoint &p) const {
    // The expression builder gives both operands one type (an int with a float is
    // converted to float), so compare in that type.
    const ExprNode &a0 = *e.args.at(0);
    Scalar a = arg(e, 0, p), b = arg(e, 1, p);
    auto cmp = [&](auto x, auto y) {
      switch (e.op) {
      case ExprOp::Lt: return x < y;
      case ExprOp::Le: return x <= y;
      case ExprOp::Gt: return x > y;
      case ExprOp::Ge: return x >= y;
      case ExprOp::Eq: return x == y;
      case ExprOp::Ne: return x != y;
      default: internal_error("mod evaluation: not a comparison");
      }
    };
    bool r = a0.type == ExprType::Float ? cmp(a.f, b.f) : cmp(a.i, b.i);
    return ival(r);
  }

  Scalar load(const ExprNode &e, const ModPoint &p) const {
    const Node &t = c_.g.node(e.tensor);
    const Tensor &v = c_.vals.at(e.tensor);
    const Shape &shape = v.shape();
    if (e.args.size() != shape.size())
      internal_error("mod load: rank mismatch on '" + t.name + "'");
    std::int64_t flat = 0;
    Shape idx;
    for (std::size_t i = 0; i < e.args.size(); ++i)
      idx.push_back(eval(*e.args[i], p).i);
    for (std::size_t i = 0; i < idx.size(); ++i) {
      if (idx[i] < 0 || idx[i] >= shape[i])
        user_error(detail::mod_load_out_of_bounds(c_.g, c_.n, which_, e, idx, shape,
                                                  detail::ModAt{p.b, p.h, p.q, p.kv}));
      flat = flat * shape[i] + idx[i];
    }
    double x = v.data_as<double>()[flat];
    if (e.type == ExprType::Float)
      return fval(x);
    // Node values are doubles, exact for integers up to 2^53; refuse to guess beyond.
    if (!(std::fabs(x) <= 0x1p53))
      user_error(c_.who() + ": " + which_ + " loads '" + t.name + "'" + shape_str(idx) + " = " +
                 int_str(x) +
                 ", beyond the integers the reference interpreter holds exactly "
                 "(2^53), at " +
                 where(p));
    return ival(static_cast<std::int64_t>(x));
  }

  const Ctx &c_;
  std::string which_;
};

/// The (b, h, q, kv) of element `flat` of a score tensor of rank 2..4: the last two axes
/// are (q, kv), axis -3 is h and axis -4 is b; absent ones are 0.
ModPoint score_point(std::int64_t flat, const Shape &s) {
  Shape idx = unravel_index(flat, s);
  int r = static_cast<int>(s.size());
  ModPoint p;
  p.q = idx[r - 2];
  p.kv = idx[r - 1];
  p.h = r >= 3 ? idx[r - 3] : 0;
  p.b = r >= 4 ? idx[r - 4] : 0;
  p.len_q = s[r - 2];
  p.len_kv = s[r - 1];
  return p;
}

// ---- leaves --------------------------------------------------------------------------

/// Inputs and params: the user's tensor, whatever its dtype, converted to double.
Tensor eval_argument(const Ctx &c) {
  auto it = c.inputs.find(c.n.name);
  if (it == c.inputs.end())
    internal_error("argument '" + c.n.name + "' not bound after bind_dims");
  return it->second.to(DType::F64);
}

Tensor eval_constant(const Ctx &c) {
  Tensor out = make_out(c);
  const std::vector<double> &d = *c.n.attrs.data;
  if (static_cast<std::int64_t>(d.size()) != out.numel())
    internal_error("constant '" + c.n.name + "': data size");
  std::copy(d.begin(), d.end(), out_ptr(out));
  return out;
}

// ---- linear algebra --------------------------------------------------------------------

/// (..., M, K) x (..., K, N): equal batch dims, or one side 2-D and shared by every batch.
Tensor eval_matmul(const Ctx &c) {
  const Shape &sa = c.shape(0), &sb = c.shape(1);
  int ra = static_cast<int>(sa.size()), rb = static_cast<int>(sb.size());
  std::int64_t M = sa[ra - 2], K = sa[ra - 1], N = sb[rb - 1];
  Tensor out = make_out(c);
  std::int64_t batches = extent(out.shape(), 0, out.rank() - 2);
  bool a_batched = ra > 2, b_batched = rb > 2;
  const double *a = c.ptr(0), *b = c.ptr(1);
  double *o = out_ptr(out);
  for (std::int64_t bi = 0; bi < batches; ++bi) {
    const double *ab = a + (a_batched ? bi * M * K : 0);
    const double *bb = b + (b_batched ? bi * K * N : 0);
    for (std::int64_t i = 0; i < M; ++i)
      for (std::int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (std::int64_t k = 0; k < K; ++k)
          s += ab[i * K + k] * bb[k * N + j];
        o[(bi * M + i) * N + j] = s;
      }
  }
  return out;
}

/// x (..., K) . w (K, N) [+ bias (N)]: the weight is stored (in, out), not PyTorch's
/// (out, in).
Tensor eval_linear(const Ctx &c) {
  const Shape &sw = c.shape(1);
  std::int64_t K = sw[0], N = sw[1];
  Tensor out = make_out(c);
  std::int64_t rows = out.numel() / std::max<std::int64_t>(N, 1);
  if (N == 0)
    rows = 0;
  const double *x = c.ptr(0), *w = c.ptr(1);
  const double *bias = c.n.attrs.has_bias ? c.ptr(2) : nullptr;
  double *o = out_ptr(out);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = 0; j < N; ++j) {
      double s = bias ? bias[j] : 0.0;
      for (std::int64_t k = 0; k < K; ++k)
        s += x[r * K + k] * w[k * N + j];
      o[r * N + j] = s;
    }
  return out;
}

Tensor eval_transpose(const Ctx &c) {
  const Shape &si = c.shape(0);
  int r = static_cast<int>(si.size());
  int a = normalize_axis(c.n.attrs.axes.at(0), r, c.who());
  int b = normalize_axis(c.n.attrs.axes.at(1), r, c.who());
  Tensor out = make_out(c);
  const double *x = c.ptr(0);
  double *o = out_ptr(out);
  Shape st = c.in(0).strides();
  for (std::int64_t f = 0; f < out.numel(); ++f) {
    Shape idx = unravel_index(f, out.shape());
    std::swap(idx[a], idx[b]);
    std::int64_t src = 0;
    for (int i = 0; i < r; ++i)
      src += idx[i] * st[i];
    o[f] = x[src];
  }
  return out;
}

// ---- elementwise -------------------------------------------------------------------------

Tensor eval_scale(const Ctx &c) {
  Tensor out = make_out(c);
  double s = c.n.attrs.scale.value();
  const double *x = c.ptr(0);
  double *o = out_ptr(out);
  for (std::int64_t i = 0; i < out.numel(); ++i)
    o[i] = x[i] * s;
  return out;
}

/// a op b where the shorter operand's dims are the trailing dims of the longer: the
/// shorter is repeated over the longer's leading dims (so element i of the longer pairs
/// with element i mod numel(shorter)). Division is IEEE: x/0 is +-inf, 0/0 is NaN.
template <class Op> Tensor eval_broadcast(const Ctx &c, Op op) {
  Tensor out = make_out(c);
  const double *a = c.ptr(0), *b = c.ptr(1);
  std::int64_t na = c.in(0).numel(), nb = c.in(1).numel();
  double *o = out_ptr(out);
  for (std::int64_t i = 0; i < out.numel(); ++i)
    o[i] = op(a[i % na], b[i % nb]);
  return out;
}

Tensor eval_add(const Ctx &c) { return eval_broadcast(c, std::plus<>()); }
Tensor eval_sub(const Ctx &c) { return eval_broadcast(c, std::minus<>()); }
Tensor eval_mul(const Ctx &c) { return eval_broadcast(c, std::multiplies<>()); }
Tensor eval_div(const Ctx &c) { return eval_broadcast(c, std::divides<>()); }

template <class F> Tensor eval_unary(const Ctx &c, F f) {
  Tensor out = make_out(c);
  const double *x = c.ptr(0);
  double *o = out_ptr(out);
  for (std::int64_t i = 0; i < out.numel(); ++i)
    o[i] = f(x[i]);
  return out;
}

double silu(double x) { return x / (1.0 + std::exp(-x)); }

/// The exact GELU: 0.5 x (1 + erf(x / sqrt 2)).
double gelu_exact(double x) { return 0.5 * x * (1.0 + std::erf(x / std::numbers::sqrt2)); }

/// Exact, or approximate (tanh): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), PyTorch's
/// gelu(approximate='tanh').
Tensor eval_gelu(const Ctx &c) {
  if (c.n.attrs.approximate) {
    const double k = std::sqrt(2.0 / std::numbers::pi);
    return eval_unary(
        c, [k](double x) { return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x))); });
  }
  return eval_unary(c, gelu_exact);
}

/// x * sigmoid(x), computed as x / (1 + e^-x) (-0 for very negative x, never NaN).
Tensor eval_silu(const Ctx &c) { return eval_unary(c, silu); }

/// log(1 + e^x) as max(x, 0) + log1p(e^-|x|): no overflow for large x, e^x's digits for
/// very negative x.
Tensor eval_softplus(const Ctx &c) {
  return eval_unary(c, [](double x) { return std::max(x, 0.0) + std::log1p(std::exp(-std::fabs(x))); });
}

/// 1 / (1 + e^-x): 0 for very negative x (e^-x overflows to inf), never NaN.
Tensor eval_sigmoid(const Ctx &c) {
  return eval_unary(c, [](double x) { return 1.0 / (1.0 + std::exp(-x)); });
}

/// max(x, 0), NaN kept (as arith.maximumf in compiled kernels; not std::max's x > 0 test).
Tensor eval_relu(const Ctx &c) {
  return eval_unary(c, [](double x) { return std::isnan(x) || x > 0 ? x : 0.0; });
}

/// x > 0 ? x : alpha (e^x - 1).
Tensor eval_elu(const Ctx &c) {
  double alpha = c.n.attrs.alpha;
  return eval_unary(c, [alpha](double x) { return x > 0 ? x : alpha * std::expm1(x); });
}

/// cap * tanh(x / cap), cap > 0 (the op's row refuses others).
Tensor eval_softcap(const Ctx &c) {
  double cap = c.n.attrs.alpha;
  return eval_unary(c, [cap](double x) { return cap * std::tanh(x / cap); });
}

/// silu(gate) * up, elementwise (gate is input 0).
Tensor eval_swiglu(const Ctx &c) {
  return eval_broadcast(c, [](double gate, double up) { return silu(gate) * up; });
}

/// gelu(gate) * up with the exact GELU, elementwise (gate is input 0).
Tensor eval_geglu(const Ctx &c) {
  return eval_broadcast(c, [](double gate, double up) { return gelu_exact(gate) * up; });
}

// ---- reductions ----------------------------------------------------------------------------

/// Softmax of `n` values spaced `stride` apart, into the same positions of `out`. The row
/// maximum is subtracted first; a row whose entries are all -inf (fully masked, or empty)
/// gives 0 everywhere instead of 0/0 = NaN. A NaN entry makes the whole row NaN (a masked
/// score is -inf before it gets here, so only kept NaNs count); +inf propagates as IEEE says.
void softmax_row(const double *x, double *out, std::int64_t n, std::int64_t stride) {
  double m = kNegInf;
  bool nan = false;
  for (std::int64_t i = 0; i < n; ++i) {
    nan = nan || std::isnan(x[i * stride]);
    m = std::max(m, x[i * stride]);
  }
  if (nan) {
    for (std::int64_t i = 0; i < n; ++i)
      out[i * stride] = kNaN;
    return;
  }
  if (m == kNegInf) {
    for (std::int64_t i = 0; i < n; ++i)
      out[i * stride] = 0.0;
    return;
  }
  double sum = 0;
  for (std::int64_t i = 0; i < n; ++i)
    sum += out[i * stride] = std::exp(x[i * stride] - m);
  for (std::int64_t i = 0; i < n; ++i)
    out[i * stride] /= sum;
}

Tensor eval_softmax(const Ctx &c) {
  const Shape &s = c.shape(0);
  int r = static_cast<int>(s.size());
  int ax = normalize_axis(c.n.attrs.axes.at(0), r, c.who());
  std::int64_t outer = extent(s, 0, ax), n = s[ax], inner = extent(s, ax + 1, r);
  Tensor out = make_out(c);
  const double *x = c.ptr(0);
  double *o = out_ptr(out);
  for (std::int64_t a = 0; a < outer; ++a)
    for (std::int64_t b = 0; b < inner; ++b) {
      std::int64_t base = a * n * inner + b;
      softmax_row(x + base, o + base, n, inner);
    }
  return out;
}

/// (x - mean) / sqrt(var + eps) over the last axis, var biased (divided by D, like
/// PyTorch), then * gamma + beta when given.
Tensor eval_layer_norm(const Ctx &c) {
  Tensor out = make_out(c);
  std::int64_t D = out.shape().back();
  std::int64_t rows = D == 0 ? 0 : out.numel() / D;
  const double *x = c.ptr(0);
  const double *gamma = c.n.attrs.has_gamma ? c.ptr(1) : nullptr;
  const double *beta = c.n.attrs.has_beta ? c.ptr(c.n.attrs.has_gamma ? 2 : 1) : nullptr;
  double *o = out_ptr(out);
  for (std::int64_t r = 0; r < rows; ++r) {
    const double *xr = x + r * D;
    double mean = 0, var = 0;
    for (std::int64_t d = 0; d < D; ++d)
      mean += xr[d];
    mean /= static_cast<double>(D);
    for (std::int64_t d = 0; d < D; ++d)
      var += (xr[d] - mean) * (xr[d] - mean);
    var /= static_cast<double>(D);
    double inv = 1.0 / std::sqrt(var + c.n.attrs.eps);
    for (std::int64_t d = 0; d < D; ++d) {
      double y = (xr[d] - mean) * inv;
      if (gamma)
        y *= gamma[d];
      if (beta)
        y += beta[d];
      o[r * D + d] = y;
    }
  }
  return out;
}

/// x / sqrt(mean(x^2) + eps) over the last axis, then * gamma when given (no mean
/// subtraction, no beta).
Tensor eval_rms_norm(const Ctx &c) {
  Tensor out = make_out(c);
  std::int64_t D = out.shape().back();
  std::int64_t rows = D == 0 ? 0 : out.numel() / D;
  const double *x = c.ptr(0);
  const double *gamma = c.n.attrs.has_gamma ? c.ptr(1) : nullptr;
  double *o = out_ptr(out);
  for (std::int64_t r = 0; r < rows; ++r) {
    const double *xr = x + r * D;
    double ms = 0;
    for (std::int64_t d = 0; d < D; ++d)
      ms += xr[d] * xr[d];
    ms /= static_cast<double>(D);
    double inv = 1.0 / std::sqrt(ms + c.n.attrs.eps);
    for (std::int64_t d = 0; d < D; ++d)
      o[r * D + d] = xr[d] * inv * (gamma ? gamma[d] : 1.0);
  }
  return out;
}

// ---- layout --------------------------------------------------------------------------------

/// (..., L, H*Dh) -> (..., H, L, Dh) with feature f = h*Dh + d: head h is the h-th block
/// of Dh consecutive features (a reshape to (..., L, H, Dh), then swapping L and H).
Tensor eval_split_heads(const Ctx &c) {
  Tensor out = make_out(c);
  const Shape &so = out.shape();
  int r = out.rank();
  std::int64_t H = so[r - 3], L = so[r - 2], Dh = so[r - 1];
  std::int64_t batch = extent(so, 0, r - 3);
  const double *x = c.ptr(0);
  double *o = out_ptr(out);
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t l = 0; l < L; ++l)
        for (std::int64_t d = 0; d < Dh; ++d)
          o[((b * H + h) * L + l) * Dh + d] = x[(b * L + l) * H * Dh + h * Dh + d];
  return out;
}

/// (..., H, L, Dh) -> (..., L, H*Dh), the inverse of split_heads.
Tensor eval_merge_heads(const Ctx &c) {
  const Shape &si = c.shape(0);
  int r = static_cast<int>(si.size());
  std::int64_t H = si[r - 3], L = si[r - 2], Dh = si[r - 1];
  std::int64_t batch = extent(si, 0, r - 3);
  Tensor out = make_out(c);
  const double *x = c.ptr(0);
  double *o = out_ptr(out);
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t l = 0; l < L; ++l)
        for (std::int64_t d = 0; d < Dh; ++d)
          o[(b * L + l) * H * Dh + h * Dh + d] = x[((b * H + h) * L + l) * Dh + d];
  return out;
}

/// The inputs one after another along attrs.axes[0], in input order.
Tensor eval_concat(const Ctx &c) {
  Tensor out = make_out(c);
  const Shape &so = out.shape();
  int r = out.rank();
  int ax = normalize_axis(c.n.attrs.axes.at(0), r, c.who());
  std::int64_t outer = extent(so, 0, ax), inner = extent(so, ax + 1, r), total = so[ax];
  double *o = out_ptr(out);
  std::int64_t at = 0; // where along the axis the current input starts
  for (std::size_t i = 0; i < c.n.inputs.size(); ++i) {
    std::int64_t e = c.shape(i)[ax];
    const double *x = c.ptr(i);
    for (std::int64_t a = 0; a < outer; ++a)
      for (std::int64_t k = 0; k < e; ++k)
        for (std::int64_t b = 0; b < inner; ++b)
          o[(a * total + at + k) * inner + b] = x[(a * e + k) * inner + b];
    at += e;
  }
  return out;
}

// ---- masks and score mods -----------------------------------------------------------------

/// Scores (rank 2..4, see score_point) where the mask expression is false become -inf.
Tensor eval_mask(const Ctx &c) {
  Tensor out = make_out(c);
  ModEvaluator m(c, "mask_mod");
  const double *x = c.ptr(0);
  double *o = out_ptr(out);
  for (std::int64_t i = 0; i < out.numel(); ++i) {
    ModPoint p = score_point(i, out.shape());
    o[i] = m.condition(*c.n.attrs.mask, p) ? x[i] : kNegInf;
  }
  return out;
}

/// score := expr(score, b, h, q, kv) for every element (rank 2..4, see score_point).
Tensor eval_score_mod(const Ctx &c) {
  Tensor out = make_out(c);
  ModEvaluator m(c, "score_mod");
  const double *x = c.ptr(0);
  double *o = out_ptr(out);
  for (std::int64_t i = 0; i < out.numel(); ++i) {
    ModPoint p = score_point(i, out.shape());
    p.score = x[i];
    o[i] = m.number(*c.n.attrs.score, p);
  }
  return out;
}

// ---- positions ------------------------------------------------------------------------------

/// x + PE over the last two axes (position, feature): p = offset + row, i = d / 2,
/// angle = p / base^(2i / D), PE = sin(angle) for even d and cos(angle) for odd d, with D
/// the extent of the last axis (an odd D simply ends with a sin column).
Tensor eval_sinusoidal_pe(const Ctx &c) {
  Tensor out = make_out(c);
  const Shape &s = out.shape();
  int r = out.rank();
  std::int64_t P = s[r - 2], D = s[r - 1], batch = extent(s, 0, r - 2);
  const double *x = c.ptr(0);
  double *o = out_ptr(out);
  for (std::int64_t row = 0; row < P; ++row) {
    double p = static_cast<double>(c.n.attrs.offset + row);
    for (std::int64_t d = 0; d < D; ++d) {
      std::int64_t i = d / 2;
      double angle =
          p / std::pow(c.n.attrs.base, static_cast<double>(2 * i) / static_cast<double>(D));
      double pe = d % 2 == 0 ? std::sin(angle) : std::cos(angle);
      for (std::int64_t b = 0; b < batch; ++b) {
        std::int64_t f = (b * P + row) * D + d;
        o[f] = x[f] + pe;
      }
    }
  }
  return out;
}

/// Rotary embedding over the last two axes (position, Dh): p = offset + row; for i in
/// [0, Dh/2), angle = p * base^(-2i/Dh), and the pair (a, b) = (x[2i], x[2i+1]) when
/// interleaved (GPT-J) or (x[i], x[i + Dh/2]) otherwise (Llama/NeoX) becomes
/// (a cos - b sin, a sin + b cos).
Tensor eval_rope(const Ctx &c) {
  Tensor out = make_out(c);
  const Shape &s = out.shape();
  int r = out.rank();
  std::int64_t P = s[r - 2], Dh = s[r - 1], half = Dh / 2, batch = extent(s, 0, r - 2);
  const double *x = c.ptr(0);
  double *o = out_ptr(out);
  // With positions (L) or (B, L): leading row b of x (over its dims before L) belongs to
  // sequence b / per_seq, per_seq = the extent of the dims between B and L.
  bool given = c.n.inputs.size() == 2;
  const double *pos = given ? c.ptr(1) : nullptr;
  bool per_batch = given && c.in(1).rank() == 2;
  std::int64_t per_seq = per_batch ? batch / s[0] : 1;
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t row = 0; row < P; ++row) {
      double p = !given     ? static_cast<double>(c.n.attrs.offset + row)
                 : per_batch ? pos[(b / per_seq) * P + row]
                             : pos[row];
      std::int64_t base = (b * P + row) * Dh;
      for (std::int64_t i = 0; i < half; ++i) {
        double theta =
            std::pow(c.n.attrs.base, -static_cast<double>(2 * i) / static_cast<double>(Dh));
        double cs = std::cos(p * theta), sn = std::sin(p * theta);
        std::int64_t ia = c.n.attrs.interleaved ? 2 * i : i;
        std::int64_t ib = c.n.attrs.interleaved ? 2 * i + 1 : i + half;
        double xa = x[base + ia], xb = x[base + ib];
        o[base + ia] = xa * cs - xb * sn;
        o[base + ib] = xa * sn + xb * cs;
      }
    }
  }
  return out;
}

// ---- KV caches ---------------------------------------------------------------------------------

/// Sequence b's length in the cache, checked against the rows the cache holds.
std::int64_t cache_length(const Ctx &c, int input, std::int64_t b, std::int64_t rows) {
  double v = c.ptr(input)[b];
  if (!(v >= 0 && v <= static_cast<double>(rows)))
    user_error(c.who() + ": lengths '" + c.in_node(input).name + "'[" + std::to_string(b) +
               "] = " + int_str(v) + " is outside [0, " + std::to_string(rows) +
               "], the rows the cache holds");
  return static_cast<std::int64_t>(v);
}

/// out[b, h, j, :] = j < len_b ? stored(b, h, j) : j < len_b + n ? fresh[b, h, j - len_b] : 0,
/// with stored(b, h, j) the row of a contiguous cache or of a page.
Tensor eval_cache_view(const Ctx &c) {
  bool paged = c.n.op == OpKind::PagedCacheView;
  Tensor out = make_out(c);
  const Shape &so = out.shape(), &sf = c.shape(paged ? 3 : 2), &ss = c.shape(0);
  std::int64_t B = so[0], H = so[1], S = so[2], D = so[3], n = sf[2];
  std::int64_t page = ss[2], pages_per_seq = paged ? c.shape(1)[1] : 0;
  std::int64_t rows = paged ? pages_per_seq * page : ss[2];
  const double *store = c.ptr(0), *fresh = c.ptr(paged ? 3 : 2);
  double *o = out_ptr(out);
  for (std::int64_t b = 0; b < B; ++b) {
    std::int64_t len = cache_length(c, paged ? 2 : 1, b, rows);
    for (std::int64_t j = 0; j < S; ++j) {
      for (std::int64_t h = 0; h < H; ++h) {
        double *dst = o + ((b * H + h) * S + j) * D;
        const double *src = nullptr;
        if (j < len && !paged) {
          src = store + ((b * H + h) * ss[2] + j) * D;
        } else if (j < len) {
          double pg = c.ptr(1)[b * pages_per_seq + j / page];
          if (!(pg >= 0 && pg < static_cast<double>(ss[0])))
            user_error(c.who() + ": table '" + c.in_node(1).name + "'[" + std::to_string(b) +
                       ", " + std::to_string(j / page) + "] = " + int_str(pg) +
                       " is not a page of '" + c.in_node(0).name + "' (" + std::to_string(ss[0]) +
                       " pages)");
          src = store + ((static_cast<std::int64_t>(pg) * H + h) * page + j % page) * D;
        } else if (j < len + n) {
          src = fresh + ((b * H + h) * n + (j - len)) * D;
        }
        for (std::int64_t d = 0; d < D; ++d)
          dst[d] = src ? src[d] : 0.0;
      }
    }
  }
  return out;
}

// ---- lookups and projections ------------------------------------------------------------------

/// out[..., :] = table[ids[...], :]; an id outside [0, V) is a user error.
Tensor eval_embedding(const Ctx &c) {
  Tensor out = make_out(c);
  const Shape &st = c.shape(1);
  std::int64_t V = st[0], D = st[1];
  const Tensor &ids = c.in(0);
  const double *id = c.ptr(0), *table = c.ptr(1);
  double *o = out_ptr(out);
  for (std::int64_t i = 0; i < ids.numel(); ++i) {
    double v = id[i];
    if (!(v >= 0 && v < static_cast<double>(V)))
      user_error(c.who() + ": ids '" + c.in_node(0).name + "'" +
                 shape_str(unravel_index(i, ids.shape())) + " = " + int_str(v) +
                 " is out of range for table '" + c.in_node(1).name + "' with vocab size " +
                 std::to_string(V));
    auto row = static_cast<std::int64_t>(v);
    std::copy(table + row * D, table + (row + 1) * D, o + i * D);
  }
  return out;
}

/// x (..., S, D), e (K', S) -> e . x per leading index: out[..., k, d] = sum_s e[k, s]
/// x[..., s, d].
Tensor eval_linformer_project(const Ctx &c) {
  const Shape &sx = c.shape(0), &se = c.shape(1);
  int r = static_cast<int>(sx.size());
  std::int64_t S = sx[r - 2], D = sx[r - 1], Kp = se[0], batch = extent(sx, 0, r - 2);
  Tensor out = make_out(c);
  const double *x = c.ptr(0), *e = c.ptr(1);
  double *o = out_ptr(out);
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t k = 0; k < Kp; ++k)
      for (std::int64_t d = 0; d < D; ++d) {
        double sum = 0;
        for (std::int64_t s = 0; s < S; ++s)
          sum += e[k * S + s] * x[(b * S + s) * D + d];
        o[(b * Kp + k) * D + d] = sum;
      }
  return out;
}

// ---- attention ----------------------------------------------------------------------------------

/// The layout shared by attention and linear_attention: q (B, Hq, L, Dh), k (B, Hkv, S,
/// Dh), v (B, Hkv, S, Dv) with B = 1 for rank <= 3 and Hq = Hkv = 1 for rank 2.
struct AttnShape {
  std::int64_t B, Hq, Hkv, L, S, Dh, Dv;

  explicit AttnShape(const Ctx &c) {
    const Shape &sq = c.shape(0), &sk = c.shape(1), &sv = c.shape(2);
    int r = static_cast<int>(sq.size());
    B = r == 4 ? sq[0] : 1;
    Hq = r >= 3 ? sq[r - 3] : 1;
    Hkv = r >= 3 ? sk[r - 3] : 1;
    L = sq[r - 2];
    S = sk[r - 2];
    Dh = sq[r - 1];
    Dv = sv[r - 1];
    if (Hq != Hkv && (Hkv == 0 || Hq % Hkv != 0))
      internal_error(c.who() + ": head counts " + std::to_string(Hq) + ", " + std::to_string(Hkv));
  }
  /// GQA/MQA: query head h reads kv head h / (Hq / Hkv).
  std::int64_t kv_head(std::int64_t h) const { return Hq == Hkv ? h : h / (Hq / Hkv); }
  std::int64_t q_off(std::int64_t b, std::int64_t h, std::int64_t i) const {
    return ((b * Hq + h) * L + i) * Dh;
  }
  std::int64_t k_off(std::int64_t b, std::int64_t h, std::int64_t j) const {
    return ((b * Hkv + h) * S + j) * Dh;
  }
  std::int64_t v_off(std::int64_t b, std::int64_t h, std::int64_t j) const {
    return ((b * Hkv + h) * S + j) * Dv;
  }
  std::int64_t o_off(std::int64_t b, std::int64_t h, std::int64_t i) const {
    return ((b * Hq + h) * L + i) * Dv;
  }
};

/// The scores of query i of (batch b, query head h) of an attention node, as its softmax
/// sees them: scale * q.k, then the score_mod, then -inf where the mask drops them.
class AttentionScores {
public:
  explicit AttentionScores(const Ctx &c) : c_(c), a_(c) {
    scale_ = c.n.attrs.scale ? *c.n.attrs.scale : 1.0 / std::sqrt(static_cast<double>(a_.Dh));
    if (c.n.attrs.score)
      score_mod_.emplace(c, "score_mod");
    if (c.n.attrs.mask)
      mask_.emplace(c, "mask_mod");
  }
  const AttnShape &shape() const { return a_; }
  void row(std::int64_t b, std::int64_t h, std::int64_t i, std::vector<double> &s) const {
    const double *q = c_.ptr(0), *k = c_.ptr(1);
    std::int64_t hk = a_.kv_head(h);
    for (std::int64_t j = 0; j < a_.S; ++j) {
      double dot = 0;
      for (std::int64_t d = 0; d < a_.Dh; ++d)
        dot += q[a_.q_off(b, h, i) + d] * k[a_.k_off(b, hk, j) + d];
      ModPoint pt{b, h, i, j, a_.L, a_.S, scale_ * dot};
      s[j] = score_mod_ ? score_mod_->number(*c_.n.attrs.score, pt) : pt.score;
      if (mask_ && !mask_->condition(*c_.n.attrs.mask, pt))
        s[j] = kNegInf;
    }
  }

private:
  const Ctx &c_;
  AttnShape a_;
  double scale_ = 1;
  std::optional<ModEvaluator> score_mod_, mask_;
};

/// For each (b, query head h, query i): s_j = scale * q_i . k_j (scale = attrs.scale, or
/// 1/sqrt(Dh)), then s_j = score_mod(s_j, b, h, i, j) if set, then s_j = -inf where the
/// mask is false, then softmax over j (a fully masked row gives an output of 0), and
/// out_i = sum_j p_j v_j. The h given to the mods is the query head; len_q = L and
/// len_kv = S. Both mods are evaluated at every (i, j), masked or not.
Tensor eval_attention(const Ctx &c) {
  AttentionScores scores(c);
  const AttnShape &a = scores.shape();
  Tensor out = make_out(c);
  const double *v = c.ptr(2);
  double *o = out_ptr(out);
  std::vector<double> s(a.S), p(a.S);
  for (std::int64_t b = 0; b < a.B; ++b)
    for (std::int64_t h = 0; h < a.Hq; ++h) {
      std::int64_t hk = a.kv_head(h);
      for (std::int64_t i = 0; i < a.L; ++i) {
        scores.row(b, h, i, s);
        softmax_row(s.data(), p.data(), a.S, 1);
        for (std::int64_t e = 0; e < a.Dv; ++e) {
          double acc = 0;
          for (std::int64_t j = 0; j < a.S; ++j)
            acc += p[j] * v[a.v_off(b, hk, j) + e];
          o[a.o_off(b, h, i) + e] = acc;
        }
      }
    }
  return out;
}

/// The log-sum-exp of row (b, h, i) of attention node c.in_node(0)'s scores, as its
/// softmax sees them: m + log(sum_j e^(s_j - m)), m = max_j s_j; -inf for a fully masked
/// row, NaN when a kept score is NaN.
Tensor eval_attention_lse(const Ctx &c) {
  const Node &att = c.in_node(0);
  Ctx ac{c.g, att, c.dims, c.vals, c.inputs};
  AttentionScores scores(ac);
  const AttnShape &a = scores.shape();
  Tensor out = make_out(c);
  double *o = out_ptr(out);
  std::vector<double> s(a.S);
  for (std::int64_t b = 0; b < a.B; ++b)
    for (std::int64_t h = 0; h < a.Hq; ++h)
      for (std::int64_t i = 0; i < a.L; ++i) {
        scores.row(b, h, i, s);
        double m = kNegInf, sum = 0;
        bool nan = false;
        for (double x : s) {
          nan = nan || std::isnan(x);
          m = std::max(m, x);
        }
        for (double x : s)
          sum += std::exp(x - m);
        o[(b * a.Hq + h) * a.L + i] = nan ? kNaN : m == kNegInf ? kNegInf : m + std::log(sum);
      }
  return out;
}

/// The weights e^(la - m), e^(lb - m) of two partials, m = max(la, lb); both 0 when
/// both are -inf, NaN when either is.
std::pair<double, double> merge_weights(double la, double lb) {
  if (std::isnan(la) || std::isnan(lb))
    return {kNaN, kNaN};
  double m = std::max(la, lb);
  if (m == kNegInf)
    return {0.0, 0.0};
  return {std::exp(la - m), std::exp(lb - m)};
}

/// out = (wa oa + wb ob) / (wa + wb) per row (merge_weights), 0 for a row both partials
/// masked fully.
Tensor eval_merge_attention(const Ctx &c) {
  Tensor out = make_out(c);
  const double *oa = c.ptr(0), *la = c.ptr(1), *ob = c.ptr(2), *lb = c.ptr(3);
  double *o = out_ptr(out);
  std::int64_t dv = out.shape().back();
  std::int64_t rows = dv == 0 ? 0 : out.numel() / dv;
  for (std::int64_t r = 0; r < rows; ++r) {
    auto [wa, wb] = merge_weights(la[r], lb[r]);
    double total = wa + wb;
    for (std::int64_t e = 0; e < dv; ++e) {
      std::int64_t at = r * dv + e;
      o[at] = total == 0 ? 0.0 : (wa * oa[at] + wb * ob[at]) / total;
    }
  }
  return out;
}

/// log(e^la + e^lb), computed as m + log(wa + wb) (merge_weights); -inf when both are.
Tensor eval_merge_lse(const Ctx &c) {
  Tensor out = make_out(c);
  const double *la = c.ptr(0), *lb = c.ptr(1);
  double *o = out_ptr(out);
  for (std::int64_t r = 0; r < out.numel(); ++r) {
    auto [wa, wb] = merge_weights(la[r], lb[r]);
    o[r] = std::isnan(wa) ? kNaN
           : wa + wb == 0 ? kNegInf
                          : std::max(la[r], lb[r]) + std::log(wa + wb);
  }
  return out;
}

/// phi(q_i) . (sum_j phi(k_j) v_j^T) / (phi(q_i) . sum_j phi(k_j)), computed in that
/// associative order (phi(K)^T V once per kv head), with phi = elu(x) + 1 or relu(x);
/// a row whose denominator is 0 (possible with relu) gives 0. Non-causal; GQA as in
/// attention.
Tensor eval_linear_attention(const Ctx &c) {
  AttnShape a(c);
  Tensor out = make_out(c);
  const double *q = c.ptr(0), *k = c.ptr(1), *v = c.ptr(2);
  double *o = out_ptr(out);
  auto phi = [relu = c.n.attrs.feature_map == FeatureMap::Relu](double x) {
    if (relu)
      return x > 0 ? x : 0.0;
    return x > 0 ? x + 1.0 : std::exp(x); // elu(x) + 1 with alpha 1
  };
  std::vector<double> kv(a.Dh * a.Dv), z(a.Dh);
  for (std::int64_t b = 0; b < a.B; ++b)
    for (std::int64_t hk = 0; hk < a.Hkv; ++hk) {
      std::fill(kv.begin(), kv.end(), 0.0);
      std::fill(z.begin(), z.end(), 0.0);
      for (std::int64_t j = 0; j < a.S; ++j)
        for (std::int64_t d = 0; d < a.Dh; ++d) {
          double pk = phi(k[a.k_off(b, hk, j) + d]);
          z[d] += pk;
          for (std::int64_t e = 0; e < a.Dv; ++e)
            kv[d * a.Dv + e] += pk * v[a.v_off(b, hk, j) + e];
        }
      for (std::int64_t h = 0; h < a.Hq; ++h) {
        if (a.kv_head(h) != hk)
          continue;
        for (std::int64_t i = 0; i < a.L; ++i) {
          double den = 0;
          for (std::int64_t d = 0; d < a.Dh; ++d)
            den += phi(q[a.q_off(b, h, i) + d]) * z[d];
          for (std::int64_t e = 0; e < a.Dv; ++e) {
            double num = 0;
            for (std::int64_t d = 0; d < a.Dh; ++d)
              num += phi(q[a.q_off(b, h, i) + d]) * kv[d * a.Dv + e];
            o[a.o_off(b, h, i) + e] = den == 0 ? 0.0 : num / den;
          }
        }
      }
    }
  return out;
}

// ---- driver -----------------------------------------------------------------------------------

Tensor eval_node(const Ctx &c) {
  switch (c.n.op) {
  case OpKind::Input:
  case OpKind::Param: return eval_argument(c);
  case OpKind::Constant: return eval_constant(c);
  case OpKind::MatMul: return eval_matmul(c);
  case OpKind::Linear: return eval_linear(c);
  case OpKind::Transpose: return eval_transpose(c);
  case OpKind::Scale: return eval_scale(c);
  case OpKind::Add: return eval_add(c);
  case OpKind::Sub: return eval_sub(c);
  case OpKind::Mul: return eval_mul(c);
  case OpKind::Div: return eval_div(c);
  case OpKind::Softmax: return eval_softmax(c);
  case OpKind::SplitHeads: return eval_split_heads(c);
  case OpKind::MergeHeads: return eval_merge_heads(c);
  case OpKind::Concat: return eval_concat(c);
  case OpKind::Mask: return eval_mask(c);
  case OpKind::ScoreMod: return eval_score_mod(c);
  case OpKind::SinusoidalPE: return eval_sinusoidal_pe(c);
  case OpKind::Rope: return eval_rope(c);
  case OpKind::LayerNorm: return eval_layer_norm(c);
  case OpKind::RmsNorm: return eval_rms_norm(c);
  case OpKind::Gelu: return eval_gelu(c);
  case OpKind::Silu: return eval_silu(c);
  case OpKind::Elu: return eval_elu(c);
  case OpKind::Softcap: return eval_softcap(c);
  case OpKind::Softplus: return eval_softplus(c);
  case OpKind::Sigmoid: return eval_sigmoid(c);
  case OpKind::Relu: return eval_relu(c);
  case OpKind::Swiglu: return eval_swiglu(c);
  case OpKind::Geglu: return eval_geglu(c);
  case OpKind::Embedding: return eval_embedding(c);
  case OpKind::Attention: return eval_attention(c);
  case OpKind::LinformerProject: return eval_linformer_project(c);
  case OpKind::LinearAttention: return eval_linear_attention(c);
  case OpKind::CacheView:
  case OpKind::PagedCacheView: return eval_cache_view(c);
  case OpKind::AttentionLse: return eval_attention_lse(c);
  case OpKind::MergeAttention: return eval_merge_attention(c);
  case OpKind::MergeLse: return eval_merge_lse(c);
  }
  internal_error("interpreter: unknown op " + std::to_string(static_cast<int>(c.n.op)));
}

/// Evaluates the nodes marked in `live` (index = NodeId), in creation order.
std::vector<Tensor> evaluate(const Graph &g, const TensorMap &inputs,
                             const std::vector<bool> &live) {
  g.verify();
  for (const auto &[name, t] : inputs)
    if (t.empty())
      user_error("input '" + name + "' of graph '" + g.name() +
                 "' is an empty tensor (default-constructed)");
  DimBindings dims = bind_dims(g, signature(inputs));
  std::vector<Tensor> vals(g.nodes().size());
  for (const Node &n : g.nodes()) {
    if (!live.at(n.id))
      continue;
    Ctx c{g, n, dims, vals, inputs};
    Tensor t = eval_node(c);
    if (t.dtype() != DType::F64 || t.shape() != c.out_shape())
      internal_error("interpreter: " + c.who() + " produced " + t.type_str() + ", expected f64" +
                     shape_str(c.out_shape()));
    // An f16 or bf16 node's values are what a GPU kernel stores for it: computed in higher
    // precision, rounded to the node's dtype (to nearest, ties to even, through f32). The
    // next node reads the rounded values.
    if (is_half(n.dtype))
      t = t.to(n.dtype).to(DType::F64);
    vals[n.id] = std::move(t);
  }
  return vals;
}

/// Marks `from` and every node it depends on in `live`.
void mark_live(const Graph &g, NodeId from, std::vector<bool> &live) {
  live.at(from) = true;
  for (std::size_t i = static_cast<std::size_t>(from) + 1; i-- > 0;)
    if (live[i])
      for (NodeId in : g.nodes()[i].inputs)
        live.at(in) = true;
}

/// What mask_map needs of a node: its mask, the extents of its (b, h, q, kv) axes, and the
/// values of the tensors its mask reads.
struct MaskSite {
  const Node *n = nullptr;
  const ExprNode *mask = nullptr; // null: keeps everything
  std::int64_t batch = 1, heads = 1, len_q = 0, len_kv = 0;
  DimBindings dims;
  std::vector<Tensor> vals;
};

MaskSite mask_site(const Graph &g, const TensorMap &inputs, NodeId node) {
  g.verify();
  user_check(node >= 0 && node < static_cast<NodeId>(g.nodes().size()),
             "mask_map: graph '" + g.name() + "' has no node %" + std::to_string(node));
  MaskSite m;
  m.n = &g.node(node);
  user_check(m.n->op == OpKind::Attention || m.n->op == OpKind::Mask,
             "mask_map: node '" + m.n->name + "' of graph '" + g.name() + "' is a " +
                 std::string(op_name(m.n->op)) + ", not an attention or a mask");
  m.mask = m.n->attrs.mask.get();
  m.dims = bind_dims(g, signature(inputs));
  // The captured tensors come after the operands: q, k, v (attention) or the scores.
  std::size_t operands = m.n->op == OpKind::Attention ? 3 : 1;
  std::vector<bool> live(g.nodes().size(), false);
  for (std::size_t i = operands; i < m.n->inputs.size(); ++i)
    mark_live(g, m.n->inputs[i], live);
  m.vals = evaluate(g, inputs, live);
  Shape q = resolve(g.node(m.n->inputs[0]).dims, m.dims);
  Shape kv = m.n->op == OpKind::Attention ? resolve(g.node(m.n->inputs[1]).dims, m.dims) : q;
  int r = static_cast<int>(q.size());
  m.len_q = q[r - 2];
  m.len_kv = m.n->op == OpKind::Attention ? kv[r - 2] : q[r - 1];
  m.heads = r >= 3 ? q[r - 3] : 1;
  m.batch = r >= 4 ? q[r - 4] : 1;
  return m;
}

void check_position(const MaskSite &m, std::int64_t b, std::int64_t h) {
  user_check(b >= 0 && b < m.batch && h >= 0 && h < m.heads,
             "mask_map: (b=" + std::to_string(b) + ", h=" + std::to_string(h) +
                 ") is outside node '" + m.n->name + "' (" + std::to_string(m.batch) +
                 " batches, " + std::to_string(m.heads) + " heads)");
}

/// keep[j - kv_begin] for the keys [kv_begin, kv_end) of query row i.
void eval_mask_row(const Graph &g, const TensorMap &inputs, const MaskSite &m, std::int64_t b,
                   std::int64_t h, std::int64_t i, std::int64_t kv_begin, std::int64_t kv_end,
                   std::uint8_t *keep) {
  if (!m.mask) {
    std::fill(keep, keep + (kv_end - kv_begin), std::uint8_t{1});
    return;
  }
  Ctx c{g, *m.n, m.dims, m.vals, inputs};
  ModEvaluator ev(c, "mask_mod");
  for (std::int64_t j = kv_begin; j < kv_end; ++j)
    keep[j - kv_begin] = ev.condition(*m.mask, {b, h, i, j, m.len_q, m.len_kv, 0});
}

MaskMap eval_mask_map(const Graph &g, const TensorMap &inputs, const MaskSite &m, std::int64_t b,
                      std::int64_t h) {
  check_position(m, b, h);
  MaskMap out{m.len_q, m.len_kv, std::vector<std::uint8_t>(m.len_q * m.len_kv, 1)};
  for (std::int64_t i = 0; i < m.len_q; ++i)
    eval_mask_row(g, inputs, m, b, h, i, 0, m.len_kv, out.keep.data() + i * m.len_kv);
  return out;
}

/// Whether expression e reads position `which` (IndexB or IndexH), loads included.
bool reads(const ExprNode *e, ExprOp which) {
  if (!e)
    return false;
  if (e->op == which)
    return true;
  return std::any_of(e->args.begin(), e->args.end(),
                     [&](const ExprPtr &a) { return reads(a.get(), which); });
}

} // namespace

struct MaskRows::Impl {
  const Graph &g;
  TensorMap inputs;
  MaskSite site;
  std::int64_t b, h;
};

MaskRows::MaskRows(const Graph &g, const TensorMap &inputs, NodeId node, std::int64_t b,
                   std::int64_t h)
    : impl_(new Impl{g, inputs, mask_site(g, inputs, node), b, h}) {
  check_position(impl_->site, b, h);
}

MaskRows::~MaskRows() = default;
MaskRows::MaskRows(MaskRows &&) noexcept = default;

std::int64_t MaskRows::len_q() const { return impl_->site.len_q; }
std::int64_t MaskRows::len_kv() const { return impl_->site.len_kv; }

void MaskRows::row(std::int64_t i, std::int64_t kv_begin, std::int64_t kv_end,
                   std::uint8_t *keep) const {
  const MaskSite &m = impl_->site;
  if (i < 0 || i >= m.len_q || kv_begin < 0 || kv_end > m.len_kv || kv_begin > kv_end)
    internal_error("MaskRows::row(" + std::to_string(i) + ", " + std::to_string(kv_begin) + ", " +
                   std::to_string(kv_end) + ") outside " + std::to_string(m.len_q) + " x " +
                   std::to_string(m.len_kv));
  eval_mask_row(impl_->g, impl_->inputs, m, impl_->b, impl_->h, i, kv_begin, kv_end, keep);
}

std::int64_t MaskMap::kept() const {
  return static_cast<std::int64_t>(std::count(keep.begin(), keep.end(), std::uint8_t{1}));
}

MaskMap mask_map(const Graph &g, const TensorMap &inputs, NodeId node, std::int64_t b,
                 std::int64_t h) {
  return eval_mask_map(g, inputs, mask_site(g, inputs, node), b, h);
}

std::int64_t kept_pairs(const Graph &g, const TensorMap &inputs, NodeId node) {
  MaskSite m = mask_site(g, inputs, node);
  bool by_b = reads(m.mask, ExprOp::IndexB), by_h = reads(m.mask, ExprOp::IndexH);
  std::int64_t total = 0;
  for (std::int64_t b = 0; b < (by_b ? m.batch : 1); ++b)
    for (std::int64_t h = 0; h < (by_h ? m.heads : 1); ++h)
      total += eval_mask_map(g, inputs, m, b, h).kept();
  return total * (by_b ? 1 : m.batch) * (by_h ? 1 : m.heads);
}

double max_abs_score(const Graph &g, const TensorMap &inputs, const std::vector<Tensor> &values,
                     NodeId node) {
  user_check(node >= 0 && node < static_cast<NodeId>(g.nodes().size()) &&
                 g.node(node).op == OpKind::Attention,
             "max_abs_score: node %" + std::to_string(node) + " of graph '" + g.name() +
                 "' is not an attention");
  user_check(values.size() == g.nodes().size(),
             "max_abs_score: " + std::to_string(values.size()) + " values for the " +
                 std::to_string(g.nodes().size()) + " nodes of graph '" + g.name() +
                 "' (pass what run_all returned)");
  DimBindings dims = bind_dims(g, signature(inputs));
  Ctx c{g, g.node(node), dims, values, inputs};
  AttentionScores scores(c);
  const AttnShape &a = scores.shape();
  std::vector<double> s(a.S);
  double top = 0;
  for (std::int64_t b = 0; b < a.B; ++b)
    for (std::int64_t h = 0; h < a.Hq; ++h)
      for (std::int64_t i = 0; i < a.L; ++i) {
        scores.row(b, h, i, s);
        for (double x : s)
          if (std::isfinite(x))
            top = std::max(top, std::fabs(x));
      }
  return top;
}

std::vector<Tensor> run_all(const Graph &g, const TensorMap &inputs) {
  return evaluate(g, inputs, std::vector<bool>(g.nodes().size(), true));
}

TensorMap run(const Graph &g, const TensorMap &inputs) {
  // Only what the outputs depend on is computed, as a compiled kernel would: an error in a
  // dead node (say an out-of-range embedding id nobody reads) is not reported by run().
  std::vector<bool> live(g.nodes().size(), false);
  for (const auto &[name, id] : g.outputs())
    live.at(id) = true;
  for (std::size_t i = g.nodes().size(); i-- > 0;)
    if (live[i])
      for (NodeId in : g.nodes()[i].inputs)
        live.at(in) = true;
  std::vector<Tensor> vals = evaluate(g, inputs, live);
  TensorMap out;
  for (const auto &[name, id] : g.outputs())
    out[name] = vals[id];
  return out;
}

} // namespace qkv::reference
