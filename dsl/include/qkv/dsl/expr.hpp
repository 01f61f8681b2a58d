// Mod expressions: what mask_mod and score_mod lambdas return.
//
// A mod is an ordinary C++ lambda. qkv calls it once, with symbolic values for the batch
// index b, the (query) head h, the query position q, the key/value position kv and, for a
// score_mod, the score s. Operators on those values build an expression tree; the tree is
// stored in the graph, evaluated by the interpreter and emitted inside compiled kernels.
//
//   mask_mod:  [](auto b, auto h, auto q, auto kv) { return q >= kv && q - kv < 256; }
//   score_mod: [&](auto s, auto b, auto h, auto q, auto kv) { return s + slopes[h] * (kv - q); }
//
// Two C++ types: Expr (a number: integer or float, known when the tree is built) and
// BoolExpr (a condition). A mask must return a BoolExpr, a score_mod an Expr; `if`, `?:`
// and `bool(...)` on a symbolic value are compile errors that say to use qkv::select.
// Integer arithmetic is C++'s on int64 (division truncates toward zero); mixing an
// integer with a float converts the integer to float; the interpreter computes floats in
// double, compiled kernels in f32.
#pragma once

#include <concepts>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <qkv/dsl/dtype.hpp>

namespace qkv {

class Graph;

enum class ExprType : std::uint8_t { Int, Float, Bool };

enum class ExprOp : std::uint8_t {
  // leaves
  IndexB, IndexH, IndexQ, IndexKV, // the four positions a mod sees
  LenQ, LenKV,                     // extents of the query and key/value axes
  Score,                           // the score (score_mod only)
  ConstInt, ConstFloat, ConstBool,
  // unary
  Neg, Not, Exp, Log, Tanh, Abs, Sqrt, ToFloat,
  // binary
  Add, Sub, Mul, Div, Mod, Min, Max, Pow,
  Lt, Le, Gt, Ge, Eq, Ne, And, Or,
  // select(cond, a, b)
  Select,
  // a load from a captured graph tensor; args are the indices, one per dim
  Load,
};

/// The spelling of an op in printed expressions and error messages ("exp", "+", ">=").
std::string expr_op_name(ExprOp op);

struct ExprNode;
using ExprPtr = std::shared_ptr<const ExprNode>;

struct ExprNode {
  ExprOp op;
  ExprType type;
  std::int64_t ival = 0; // ConstInt, ConstBool
  double fval = 0;       // ConstFloat
  // Load: the captured tensor, as a node of `graph`.
  const Graph *graph = nullptr;
  std::int32_t tensor = -1;
  std::vector<ExprPtr> args;
};

namespace detail {
template <class T> inline constexpr bool always_false = false;
ExprPtr make_leaf(ExprOp op);
ExprPtr make_int(std::int64_t v);
ExprPtr make_float(double v);
ExprPtr make_bool(bool v);
ExprPtr make_unary(ExprOp op, ExprPtr a);
ExprPtr make_binary(ExprOp op, ExprPtr a, ExprPtr b);
ExprPtr make_select(ExprPtr c, ExprPtr a, ExprPtr b);
ExprPtr make_load(const Graph *g, std::int32_t tensor, DType dtype, std::vector<ExprPtr> idx);
} // namespace detail

#define QKV_NO_TRUTH_VALUE                                                               \
  template <class T = void> explicit operator bool() const {                             \
    static_assert(detail::always_false<T>,                                               \
                  "qkv mod: a symbolic value has no truth value while the mod is traced; " \
                  "write qkv::select(cond, a, b) instead of if / ?:, and combine "        \
                  "conditions with && || !");                                              \
    return false;                                                                         \
  }

/// A symbolic number (integer or float) inside a mod.
class Expr {
public:
  template <std::integral T>
    requires(!std::same_as<T, bool>)
  Expr(T v) : p_(detail::make_int(static_cast<std::int64_t>(v))) {}
  template <std::floating_point T> Expr(T v) : p_(detail::make_float(static_cast<double>(v))) {}
  explicit Expr(ExprPtr p);

  const ExprPtr &ptr() const { return p_; }
  ExprType type() const { return p_->type; }
  bool is_int() const { return p_->type == ExprType::Int; }
  std::string str() const;

  QKV_NO_TRUTH_VALUE

private:
  ExprPtr p_;
};

/// A symbolic condition inside a mod.
class BoolExpr {
public:
  template <class T>
    requires std::same_as<T, bool>
  BoolExpr(T v) : p_(detail::make_bool(v)) {}
  explicit BoolExpr(ExprPtr p);

  const ExprPtr &ptr() const { return p_; }
  std::string str() const;

  QKV_NO_TRUTH_VALUE

private:
  ExprPtr p_;
};

#undef QKV_NO_TRUTH_VALUE

/// A symbolic number known to be an integer when the mod is written: the indices b, h,
/// q, kv a mod receives, len_q(), len_kv(), integer constants, loads from integer tensors
/// of the typed DSL, and + - * / % min max abs select over those. The typed DSL indexes
/// tensors only with these (or C++ integers), so a float index does not compile there;
/// the untyped Value::load checks the same at run time. An IntExpr is an Expr.
class IntExpr : public Expr {
public:
  template <std::integral T>
    requires(!std::same_as<T, bool>)
  IntExpr(T v) : Expr(v) {}
  /// Throws qkv::InternalError unless p is an integer expression.
  explicit IntExpr(ExprPtr p);
};

namespace detail {
template <class T>
inline constexpr bool is_int_like = std::same_as<std::decay_t<T>, IntExpr> ||
                                    (std::integral<std::decay_t<T>> &&
                                     !std::same_as<std::decay_t<T>, bool>);
/// Both operands integers, at least one of them symbolic.
template <class A, class B>
inline constexpr bool int_operands =
    is_int_like<A> && is_int_like<B> &&
    (std::same_as<std::decay_t<A>, IntExpr> || std::same_as<std::decay_t<B>, IntExpr>);
IntExpr int_binary(ExprOp op, const Expr &a, const Expr &b);
} // namespace detail

// Arithmetic. Int op Int stays Int (except pow); anything with a float is float.
Expr operator+(const Expr &a, const Expr &b);
Expr operator-(const Expr &a, const Expr &b);
Expr operator*(const Expr &a, const Expr &b);
Expr operator/(const Expr &a, const Expr &b);
Expr operator%(const Expr &a, const Expr &b); // integers only
Expr operator-(const Expr &a);
Expr min(const Expr &a, const Expr &b);
Expr max(const Expr &a, const Expr &b);
Expr pow(const Expr &a, const Expr &b);
Expr abs(const Expr &a);
Expr exp(const Expr &a);
Expr log(const Expr &a);
Expr tanh(const Expr &a);
Expr sqrt(const Expr &a);
Expr to_float(const Expr &a);

// Comparisons and logic.
BoolExpr operator<(const Expr &a, const Expr &b);
BoolExpr operator<=(const Expr &a, const Expr &b);
BoolExpr operator>(const Expr &a, const Expr &b);
BoolExpr operator>=(const Expr &a, const Expr &b);
BoolExpr operator==(const Expr &a, const Expr &b);
BoolExpr operator!=(const Expr &a, const Expr &b);
BoolExpr operator&&(const BoolExpr &a, const BoolExpr &b);
BoolExpr operator||(const BoolExpr &a, const BoolExpr &b);
BoolExpr operator!(const BoolExpr &a);

namespace detail {
template <class T>
inline constexpr bool is_mod_value =
    std::derived_from<std::decay_t<T>, Expr> || std::same_as<std::decay_t<T>, BoolExpr>;
} // namespace detail

/// No comma operator on mod values: C++20 reads `slopes[q, kv]` as `slopes[(q, kv)]`, a
/// load of slopes[kv], which the interpreter and the kernel would then index differently.
/// The return type keeps the one message from burying itself under follow-on errors.
template <class A, class B>
  requires(detail::is_mod_value<A> || detail::is_mod_value<B>)
const B &operator,(const A &, const B &b) {
  static_assert(detail::always_false<A>,
                "a comma between mod values: t[i, j] is C++'s comma operator and would load "
                "t[j]; index a tensor with more dims as t(i, j), and a 1-D tensor with one "
                "index, t[i]");
  return b;
}

/// select(cond, a, b): a where cond holds, else b (both sides are evaluated).
Expr select(const BoolExpr &c, const Expr &a, const Expr &b);
BoolExpr select(const BoolExpr &c, const BoolExpr &a, const BoolExpr &b);

// Integer arithmetic on IntExprs stays an IntExpr (C++'s int64 rules, as for Expr).
template <class A, class B>
  requires detail::int_operands<A, B>
IntExpr operator+(const A &a, const B &b) {
  return detail::int_binary(ExprOp::Add, Expr(a), Expr(b));
}
template <class A, class B>
  requires detail::int_operands<A, B>
IntExpr operator-(const A &a, const B &b) {
  return detail::int_binary(ExprOp::Sub, Expr(a), Expr(b));
}
template <class A, class B>
  requires detail::int_operands<A, B>
IntExpr operator*(const A &a, const B &b) {
  return detail::int_binary(ExprOp::Mul, Expr(a), Expr(b));
}
template <class A, class B>
  requires detail::int_operands<A, B>
IntExpr operator/(const A &a, const B &b) {
  return detail::int_binary(ExprOp::Div, Expr(a), Expr(b));
}
template <class A, class B>
  requires detail::int_operands<A, B>
IntExpr operator%(const A &a, const B &b) {
  return detail::int_binary(ExprOp::Mod, Expr(a), Expr(b));
}
template <class A, class B>
  requires detail::int_operands<A, B>
IntExpr min(const A &a, const B &b) {
  return detail::int_binary(ExprOp::Min, Expr(a), Expr(b));
}
template <class A, class B>
  requires detail::int_operands<A, B>
IntExpr max(const A &a, const B &b) {
  return detail::int_binary(ExprOp::Max, Expr(a), Expr(b));
}
IntExpr operator-(const IntExpr &a);
IntExpr abs(const IntExpr &a);
template <class A, class B>
  requires(detail::is_int_like<A> && detail::is_int_like<B>)
IntExpr select(const BoolExpr &c, const A &a, const B &b) {
  return IntExpr(select(c, Expr(a), Expr(b)).ptr());
}

/// The symbolic extents of the query / key-value axes, for masks that need them
/// (e.g. causal attention aligned to the last query when L != S).
IntExpr len_q();
IntExpr len_kv();

// ---- tracing -----------------------------------------------------------------------

/// A mask_mod: (b, h, q, kv) -> condition; true keeps the score.
struct MaskFn {
  ExprPtr expr;
};
/// A score_mod: (score, b, h, q, kv) -> new score.
struct ScoreFn {
  ExprPtr expr;
};

namespace detail {
Expr index_var(ExprOp which);
/// b, h, q or kv as an IntExpr: what a traced mod receives.
IntExpr int_index_var(ExprOp which);

/// Names the mod being traced ("mask_mod", "score_mod") for the errors raised while its
/// lambda runs; nests, restoring the outer name when it ends.
class TracingMod {
public:
  explicit TracingMod(const char *which);
  ~TracingMod();
  TracingMod(const TracingMod &) = delete;
  TracingMod &operator=(const TracingMod &) = delete;
  /// The mod being traced on this thread, or nullptr.
  static const char *current();

private:
  const char *outer_;
};

// Each check below is a static_assert followed by `if constexpr` on the same condition:
// a broken rule gives its one message, and nothing is instantiated after it that would
// bury the message under follow-on errors.
template <class F> ExprPtr trace_mask(F &&f) {
  constexpr bool callable = std::is_invocable_v<F &, IntExpr, IntExpr, IntExpr, IntExpr>;
  static_assert(callable, "mask_mod must be callable as f(b, h, q, kv): four index arguments "
                          "(write [](auto b, auto h, auto q, auto kv) { ... })");
  if constexpr (callable) {
    using R = std::invoke_result_t<F &, IntExpr, IntExpr, IntExpr, IntExpr>;
    constexpr bool condition =
        std::is_same_v<std::decay_t<R>, BoolExpr> || std::is_same_v<std::decay_t<R>, bool>;
    static_assert(condition, "mask_mod must return a condition (a comparison such as q >= kv, "
                             "combined with && || !), not a number");
    if constexpr (condition) {
      TracingMod tracing("mask_mod");
      return BoolExpr(f(int_index_var(ExprOp::IndexB), int_index_var(ExprOp::IndexH),
                        int_index_var(ExprOp::IndexQ), int_index_var(ExprOp::IndexKV)))
          .ptr();
    }
  }
  return nullptr;
}

template <class F> ExprPtr trace_score(F &&f) {
  constexpr bool callable = std::is_invocable_v<F &, Expr, IntExpr, IntExpr, IntExpr, IntExpr>;
  static_assert(callable,
                "score_mod must be callable as f(score, b, h, q, kv): the score then four "
                "index arguments (write [](auto s, auto b, auto h, auto q, auto kv) { ... })");
  if constexpr (callable) {
    using R = std::invoke_result_t<F &, Expr, IntExpr, IntExpr, IntExpr, IntExpr>;
    constexpr bool number = !std::is_same_v<std::decay_t<R>, BoolExpr>;
    static_assert(number, "score_mod must return a number (the new score), not a condition; "
                          "to drop scores use a mask_mod");
    constexpr bool expr = !number || std::is_convertible_v<R, Expr>;
    static_assert(expr, "score_mod must return a number expression built from its arguments");
    if constexpr (number && expr) {
      TracingMod tracing("score_mod");
      return Expr(f(index_var(ExprOp::Score), int_index_var(ExprOp::IndexB),
                    int_index_var(ExprOp::IndexH), int_index_var(ExprOp::IndexQ),
                    int_index_var(ExprOp::IndexKV)))
          .ptr();
    }
  }
  return nullptr;
}
} // namespace detail

/// Wraps a mask lambda as a reusable mask value (for and_masks / or_masks).
template <class F>
  requires(!std::same_as<std::decay_t<F>, MaskFn>)
MaskFn mask_fn(F &&f) {
  return MaskFn{detail::trace_mask(f)};
}
inline MaskFn mask_fn(MaskFn m) { return m; }
template <class F>
  requires(!std::same_as<std::decay_t<F>, ScoreFn>)
ScoreFn score_fn(F &&f) {
  return ScoreFn{detail::trace_score(f)};
}
inline ScoreFn score_fn(ScoreFn s) { return s; }

/// Keeps a score only where every mask keeps it.
template <class... M> MaskFn and_masks(M &&...ms) {
  static_assert(sizeof...(M) >= 1, "and_masks needs at least one mask");
  MaskFn parts[] = {mask_fn(std::forward<M>(ms))...};
  BoolExpr acc(parts[0].expr);
  for (std::size_t i = 1; i < sizeof...(M); ++i)
    acc = acc && BoolExpr(parts[i].expr);
  return MaskFn{acc.ptr()};
}
/// Keeps a score where any mask keeps it.
template <class... M> MaskFn or_masks(M &&...ms) {
  static_assert(sizeof...(M) >= 1, "or_masks needs at least one mask");
  MaskFn parts[] = {mask_fn(std::forward<M>(ms))...};
  BoolExpr acc(parts[0].expr);
  for (std::size_t i = 1; i < sizeof...(M); ++i)
    acc = acc || BoolExpr(parts[i].expr);
  return MaskFn{acc.ptr()};
}

// ---- ready-made masks ---------------------------------------------------------------

/// q >= kv: a position sees itself and the past.
MaskFn causal_mask();
/// causal, and at most `window - 1` positions back: q >= kv && q - kv < window.
MaskFn sliding_window_mask(std::int64_t window);

// ---- inspection ----------------------------------------------------------------------

/// Infix text of an expression; loads print as `%<node>[i, j]` unless `names` maps the
/// node id to a tensor name.
std::string to_string(const ExprPtr &e, const std::vector<std::string> *names = nullptr);
/// The distinct graph nodes an expression loads from, in first-use order.
std::vector<std::int32_t> loaded_tensors(const ExprPtr &e);
/// Structural equality of two expression trees.
bool equal(const ExprPtr &a, const ExprPtr &b);

} // namespace qkv
