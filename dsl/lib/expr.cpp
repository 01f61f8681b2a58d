// Mod expression trees: construction with type rules, printing, comparison.
#include <qkv/dsl/expr.hpp>

#include <algorithm>
#include <functional>
#include <sstream>

#include <qkv/dsl/error.hpp>

#include "format.hpp"

namespace qkv {

std::string expr_op_name(ExprOp op) {
  switch (op) {
  case ExprOp::IndexB: return "b";
  case ExprOp::IndexH: return "h";
  case ExprOp::IndexQ: return "q";
  case ExprOp::IndexKV: return "kv";
  case ExprOp::LenQ: return "len_q";
  case ExprOp::LenKV: return "len_kv";
  case ExprOp::Score: return "score";
  case ExprOp::ConstInt: return "int";
  case ExprOp::ConstFloat: return "float";
  case ExprOp::ConstBool: return "bool";
  case ExprOp::Neg: return "-";
  case ExprOp::Not: return "!";
  case ExprOp::Exp: return "exp";
  case ExprOp::Log: return "log";
  case ExprOp::Tanh: return "tanh";
  case ExprOp::Abs: return "abs";
  case ExprOp::Sqrt: return "sqrt";
  case ExprOp::ToFloat: return "float";
  case ExprOp::Add: return "+";
  case ExprOp::Sub: return "-";
  case ExprOp::Mul: return "*";
  case ExprOp::Div: return "/";
  case ExprOp::Mod: return "%";
  case ExprOp::Min: return "min";
  case ExprOp::Max: return "max";
  case ExprOp::Pow: return "pow";
  case ExprOp::Lt: return "<";
  case ExprOp::Le: return "<=";
  case ExprOp::Gt: return ">";
  case ExprOp::Ge: return ">=";
  case ExprOp::Eq: return "==";
  case ExprOp::Ne: return "!=";
  case ExprOp::And: return "&&";
  case ExprOp::Or: return "||";
  case ExprOp::Select: return "select";
  case ExprOp::Load: return "load";
  }
  return "?";
}

namespace detail {

static ExprPtr node(ExprOp op, ExprType t, std::vector<ExprPtr> args = {}) {
  auto n = std::make_shared<ExprNode>();
  n->op = op;
  n->type = t;
  n->args = std::move(args);
  return n;
}

ExprPtr make_leaf(ExprOp op) {
  switch (op) {
  case ExprOp::Score: return node(op, ExprType::Float);
  case ExprOp::IndexB:
  case ExprOp::IndexH:
  case ExprOp::IndexQ:
  case ExprOp::IndexKV:
  case ExprOp::LenQ:
  case ExprOp::LenKV: return node(op, ExprType::Int);
  default: internal_error("make_leaf: not a leaf: " + expr_op_name(op));
  }
}

ExprPtr make_int(std::int64_t v) {
  auto n = std::make_shared<ExprNode>();
  n->op = ExprOp::ConstInt;
  n->type = ExprType::Int;
  n->ival = v;
  return n;
}

ExprPtr make_float(double v) {
  auto n = std::make_shared<ExprNode>();
  n->op = ExprOp::ConstFloat;
  n->type = ExprType::Float;
  n->fval = v;
  return n;
}

ExprPtr make_bool(bool v) {
  auto n = std::make_shared<ExprNode>();
  n->op = ExprOp::ConstBool;
  n->type = ExprType::Bool;
  n->ival = v ? 1 : 0;
  return n;
}

static ExprPtr as_float(ExprPtr a) {
  if (a->type == ExprType::Float)
    return a;
  if (a->type == ExprType::Bool)
    user_error("mod expression: a condition cannot be used as a number; write "
               "qkv::select(cond, 1.0, 0.0)");
  if (a->op == ExprOp::ConstInt)
    return make_float(static_cast<double>(a->ival));
  return node(ExprOp::ToFloat, ExprType::Float, {std::move(a)});
}

static void check_number(const ExprPtr &a, ExprOp op) {
  if (a->type == ExprType::Bool)
    user_error("mod expression: '" + expr_op_name(op) +
               "' takes numbers, got a condition; use qkv::select to turn a condition "
               "into a number");
}

ExprPtr make_unary(ExprOp op, ExprPtr a) {
  switch (op) {
  case ExprOp::Not:
    if (a->type != ExprType::Bool)
      user_error("mod expression: '!' takes a condition, got a number");
    return node(op, ExprType::Bool, {std::move(a)});
  case ExprOp::Neg:
  case ExprOp::Abs: check_number(a, op); return node(op, a->type, {a});
  case ExprOp::Exp:
  case ExprOp::Log:
  case ExprOp::Tanh:
  case ExprOp::Sqrt:
  case ExprOp::ToFloat:
    check_number(a, op);
    if (op == ExprOp::ToFloat)
      return as_float(std::move(a));
    return node(op, ExprType::Float, {as_float(std::move(a))});
  default: internal_error("make_unary: " + expr_op_name(op));
  }
}

ExprPtr make_binary(ExprOp op, ExprPtr a, ExprPtr b) {
  switch (op) {
  case ExprOp::And:
  case ExprOp::Or:
    if (a->type != ExprType::Bool || b->type != ExprType::Bool)
      user_error("mod expression: '" + expr_op_name(op) + "' takes two conditions");
    return node(op, ExprType::Bool, {std::move(a), std::move(b)});
  case ExprOp::Mod:
    check_number(a, op);
    check_number(b, op);
    if (a->type != ExprType::Int || b->type != ExprType::Int)
      user_error("mod expression: '%' takes two integers, got " +
                 std::string(a->type == ExprType::Int ? "an integer" : "a float") + " and " +
                 (b->type == ExprType::Int ? "an integer" : "a float"));
    return node(op, ExprType::Int, {std::move(a), std::move(b)});
  case ExprOp::Pow:
    check_number(a, op);
    check_number(b, op);
    return node(op, ExprType::Float, {as_float(std::move(a)), as_float(std::move(b))});
  case ExprOp::Add:
  case ExprOp::Sub:
  case ExprOp::Mul:
  case ExprOp::Div:
  case ExprOp::Min:
  case ExprOp::Max:
  case ExprOp::Lt:
  case ExprOp::Le:
  case ExprOp::Gt:
  case ExprOp::Ge:
  case ExprOp::Eq:
  case ExprOp::Ne: {
    check_number(a, op);
    check_number(b, op);
    bool is_cmp = op == ExprOp::Lt || op == ExprOp::Le || op == ExprOp::Gt || op == ExprOp::Ge ||
                  op == ExprOp::Eq || op == ExprOp::Ne;
    ExprType t = ExprType::Int;
    if (a->type == ExprType::Float || b->type == ExprType::Float) {
      a = as_float(std::move(a));
      b = as_float(std::move(b));
      t = ExprType::Float;
    }
    return node(op, is_cmp ? ExprType::Bool : t, {std::move(a), std::move(b)});
  }
  default: internal_error("make_binary: " + expr_op_name(op));
  }
}

ExprPtr make_select(ExprPtr c, ExprPtr a, ExprPtr b) {
  if (c->type != ExprType::Bool)
    user_error("mod expression: select(cond, a, b) needs a condition first");
  if ((a->type == ExprType::Bool) != (b->type == ExprType::Bool))
    user_error("mod expression: select(cond, a, b) needs a and b both numbers or both "
               "conditions");
  ExprType t = a->type;
  if (t != ExprType::Bool && a->type != b->type) {
    a = as_float(std::move(a));
    b = as_float(std::move(b));
    t = ExprType::Float;
  }
  return node(ExprOp::Select, t, {std::move(c), std::move(a), std::move(b)});
}

ExprPtr make_load(const Graph *g, std::int32_t tensor, DType dtype, std::vector<ExprPtr> idx) {
  for (const auto &i : idx)
    if (i->type != ExprType::Int)
      user_error("mod expression: tensor indices must be integers, got " + to_string(i));
  auto n = node(ExprOp::Load, is_int(dtype) ? ExprType::Int : ExprType::Float, std::move(idx));
  auto m = std::const_pointer_cast<ExprNode>(n);
  m->graph = g;
  m->tensor = tensor;
  return n;
}

Expr index_var(ExprOp which) { return Expr(make_leaf(which)); }
IntExpr int_index_var(ExprOp which) { return IntExpr(make_leaf(which)); }

IntExpr int_binary(ExprOp op, const Expr &a, const Expr &b) {
  return IntExpr(make_binary(op, a.ptr(), b.ptr()));
}

namespace {
thread_local const char *tracing_mod = nullptr;
} // namespace

TracingMod::TracingMod(const char *which) : outer_(tracing_mod) { tracing_mod = which; }
TracingMod::~TracingMod() { tracing_mod = outer_; }
const char *TracingMod::current() { return tracing_mod; }

} // namespace detail

Expr::Expr(ExprPtr p) : p_(std::move(p)) {
  if (!p_)
    internal_error("Expr from null");
  if (p_->type == ExprType::Bool)
    user_error("mod expression: a condition (" + to_string(p_) +
               ") was used where a number is needed; write qkv::select(cond, 1.0, 0.0)");
}

IntExpr::IntExpr(ExprPtr p) : Expr(std::move(p)) {
  if (type() != ExprType::Int)
    internal_error("IntExpr from the non-integer expression " + str());
}

BoolExpr::BoolExpr(ExprPtr p) : p_(std::move(p)) {
  if (!p_)
    internal_error("BoolExpr from null");
  if (p_->type != ExprType::Bool)
    user_error("mod expression: a number (" + to_string(p_) +
               ") was used where a condition is needed; compare it, e.g. x != 0");
}

std::string Expr::str() const { return to_string(p_); }
std::string BoolExpr::str() const { return to_string(p_); }

using detail::make_binary;
using detail::make_unary;

Expr operator+(const Expr &a, const Expr &b) {
  return Expr(make_binary(ExprOp::Add, a.ptr(), b.ptr()));
}
Expr operator-(const Expr &a, const Expr &b) {
  return Expr(make_binary(ExprOp::Sub, a.ptr(), b.ptr()));
}
Expr operator*(const Expr &a, const Expr &b) {
  return Expr(make_binary(ExprOp::Mul, a.ptr(), b.ptr()));
}
Expr operator/(const Expr &a, const Expr &b) {
  return Expr(make_binary(ExprOp::Div, a.ptr(), b.ptr()));
}
Expr operator%(const Expr &a, const Expr &b) {
  return Expr(make_binary(ExprOp::Mod, a.ptr(), b.ptr()));
}
Expr operator-(const Expr &a) { return Expr(make_unary(ExprOp::Neg, a.ptr())); }
Expr min(const Expr &a, const Expr &b) { return Expr(make_binary(ExprOp::Min, a.ptr(), b.ptr())); }
Expr max(const Expr &a, const Expr &b) { return Expr(make_binary(ExprOp::Max, a.ptr(), b.ptr())); }
Expr pow(const Expr &a, const Expr &b) { return Expr(make_binary(ExprOp::Pow, a.ptr(), b.ptr())); }
Expr abs(const Expr &a) { return Expr(make_unary(ExprOp::Abs, a.ptr())); }
Expr exp(const Expr &a) { return Expr(make_unary(ExprOp::Exp, a.ptr())); }
Expr log(const Expr &a) { return Expr(make_unary(ExprOp::Log, a.ptr())); }
Expr tanh(const Expr &a) { return Expr(make_unary(ExprOp::Tanh, a.ptr())); }
Expr sqrt(const Expr &a) { return Expr(make_unary(ExprOp::Sqrt, a.ptr())); }
Expr to_float(const Expr &a) { return Expr(make_unary(ExprOp::ToFloat, a.ptr())); }

BoolExpr operator<(const Expr &a, const Expr &b) {
  return BoolExpr(make_binary(ExprOp::Lt, a.ptr(), b.ptr()));
}
BoolExpr operator<=(const Expr &a, const Expr &b) {
  return BoolExpr(make_binary(ExprOp::Le, a.ptr(), b.ptr()));
}
BoolExpr operator>(const Expr &a, const Expr &b) {
  return BoolExpr(make_binary(ExprOp::Gt, a.ptr(), b.ptr()));
}
BoolExpr operator>=(const Expr &a, const Expr &b) {
  return BoolExpr(make_binary(ExprOp::Ge, a.ptr(), b.ptr()));
}
BoolExpr operator==(const Expr &a, const Expr &b) {
  return BoolExpr(make_binary(ExprOp::Eq, a.ptr(), b.ptr()));
}
BoolExpr operator!=(const Expr &a, const Expr &b) {
  return BoolExpr(make_binary(ExprOp::Ne, a.ptr(), b.ptr()));
}
BoolExpr operator&&(const BoolExpr &a, const BoolExpr &b) {
  return BoolExpr(make_binary(ExprOp::And, a.ptr(), b.ptr()));
}
BoolExpr operator||(const BoolExpr &a, const BoolExpr &b) {
  return BoolExpr(make_binary(ExprOp::Or, a.ptr(), b.ptr()));
}
BoolExpr operator!(const BoolExpr &a) { return BoolExpr(make_unary(ExprOp::Not, a.ptr())); }

Expr select(const BoolExpr &c, const Expr &a, const Expr &b) {
  return Expr(detail::make_select(c.ptr(), a.ptr(), b.ptr()));
}
BoolExpr select(const BoolExpr &c, const BoolExpr &a, const BoolExpr &b) {
  return BoolExpr(detail::make_select(c.ptr(), a.ptr(), b.ptr()));
}

IntExpr operator-(const IntExpr &a) { return IntExpr(make_unary(ExprOp::Neg, a.ptr())); }
IntExpr abs(const IntExpr &a) { return IntExpr(make_unary(ExprOp::Abs, a.ptr())); }

IntExpr len_q() { return IntExpr(detail::make_leaf(ExprOp::LenQ)); }
IntExpr len_kv() { return IntExpr(detail::make_leaf(ExprOp::LenKV)); }

MaskFn causal_mask() {
  return mask_fn([](Expr, Expr, Expr q, Expr kv) { return q >= kv; });
}

MaskFn sliding_window_mask(std::int64_t window) {
  user_check(window >= 1,
             "sliding_window_mask: window must be at least 1, got " + std::to_string(window));
  return mask_fn([window](Expr, Expr, Expr q, Expr kv) { return q >= kv && q - kv < window; });
}

// ---- printing ----------------------------------------------------------------------

static int precedence(ExprOp op) {
  switch (op) {
  case ExprOp::Or: return 1;
  case ExprOp::And: return 2;
  case ExprOp::Eq:
  case ExprOp::Ne: return 3;
  case ExprOp::Lt:
  case ExprOp::Le:
  case ExprOp::Gt:
  case ExprOp::Ge: return 4;
  case ExprOp::Add:
  case ExprOp::Sub: return 5;
  case ExprOp::Mul:
  case ExprOp::Div:
  case ExprOp::Mod: return 6;
  case ExprOp::Neg:
  case ExprOp::Not: return 7;
  default: return 8; // leaves and calls
  }
}

static void print(std::ostream &os, const ExprPtr &e, const std::vector<std::string> *names,
                  int parent_prec) {
  int p = precedence(e->op);
  bool paren = p < parent_prec;
  if (paren)
    os << '(';
  switch (e->op) {
  case ExprOp::IndexB:
  case ExprOp::IndexH:
  case ExprOp::IndexQ:
  case ExprOp::IndexKV:
  case ExprOp::LenQ:
  case ExprOp::LenKV:
  case ExprOp::Score: os << expr_op_name(e->op); break;
  case ExprOp::ConstInt: os << e->ival; break;
  case ExprOp::ConstFloat: os << detail::format_double(e->fval); break;
  case ExprOp::ConstBool: os << (e->ival ? "true" : "false"); break;
  case ExprOp::Neg:
  case ExprOp::Not:
    os << expr_op_name(e->op);
    print(os, e->args[0], names, p + 1);
    break;
  case ExprOp::Exp:
  case ExprOp::Log:
  case ExprOp::Tanh:
  case ExprOp::Abs:
  case ExprOp::Sqrt:
  case ExprOp::ToFloat:
  case ExprOp::Min:
  case ExprOp::Max:
  case ExprOp::Pow:
  case ExprOp::Select: {
    os << expr_op_name(e->op) << '(';
    for (std::size_t i = 0; i < e->args.size(); ++i) {
      if (i)
        os << ", ";
      print(os, e->args[i], names, 0);
    }
    os << ')';
    break;
  }
  case ExprOp::Load: {
    if (names && e->tensor >= 0 && e->tensor < static_cast<int>(names->size()))
      os << (*names)[e->tensor];
    else
      os << '%' << e->tensor;
    os << '[';
    for (std::size_t i = 0; i < e->args.size(); ++i) {
      if (i)
        os << ", ";
      print(os, e->args[i], names, 0);
    }
    os << ']';
    break;
  }
  default: // binary infix
    print(os, e->args[0], names, p);
    os << ' ' << expr_op_name(e->op) << ' ';
    print(os, e->args[1], names, p + 1);
    break;
  }
  if (paren)
    os << ')';
}

std::string to_string(const ExprPtr &e, const std::vector<std::string> *names) {
  if (!e)
    return "<none>";
  std::ostringstream os;
  print(os, e, names, 0);
  return os.str();
}

std::vector<std::int32_t> loaded_tensors(const ExprPtr &e) {
  std::vector<std::int32_t> out;
  std::function<void(const ExprPtr &)> walk = [&](const ExprPtr &n) {
    if (!n)
      return;
    if (n->op == ExprOp::Load && std::find(out.begin(), out.end(), n->tensor) == out.end())
      out.push_back(n->tensor);
    for (const auto &a : n->args)
      walk(a);
  };
  walk(e);
  return out;
}

bool equal(const ExprPtr &a, const ExprPtr &b) {
  if (a == b)
    return true;
  if (!a || !b)
    return false;
  if (a->op != b->op || a->type != b->type || a->ival != b->ival || a->tensor != b->tensor ||
      a->args.size() != b->args.size())
    return false;
  if (a->op == ExprOp::ConstFloat && !(a->fval == b->fval))
    return false;
  for (std::size_t i = 0; i < a->args.size(); ++i)
    if (!equal(a->args[i], b->args[i]))
      return false;
  return true;
}

} // namespace qkv
