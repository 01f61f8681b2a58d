// qkv-fuzz-graphs: a graph fuzzer (docs/testing.md).
//
// Valid graphs: random DAGs of the untyped DSL's ops over random named dims (extents 1,
// odd sizes, static or dynamic), compiled once by qkv::compile and run on two bindings of
// their dynamic dims against the reference interpreter, under the differential tests'
// tolerance rule (tests/compiler/differential.hpp):
//
//   |got - want| <= C * eps(dtype) * n * (M + |want|),  C = kTolC = 8
//
// with n = 1 + the sum of the lengths of the reductions an output element goes through
// (tracked per node as the graph is built: matmul K, softmax axis, norms, attention
// Dh + S, ...) and M a bound on the magnitude of the terms those reductions add and of
// the arguments of exp/sin/cos (tracked per node from the input ranges), and at least a
// layer norm's conditioning, max |x| / sigma over its rows, taken from the interpreter's
// values as the library's rule takes it (no range bound can see rows of close values).
//
// Invalid builder calls: random misuse of every builder (wrong dims, dtypes, ranks, axes,
// heads, mod types, load index counts, ...), each of which must throw qkv::Error.
//
//   qkv-fuzz-graphs [--seed N] [--count G] [--invalid I] [--verbose]
//
// Graph i is built from seed N + i: a failure prints that seed and the graph, and
// `--seed <it> --count 1` rebuilds exactly that graph. Exit status 1 on any failure.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <qkv/compiler/compile.hpp>
#include <qkv/runtime/check_reference.hpp>
#include <qkv/runtime/interpreter.hpp>

namespace qkv::fuzz {
namespace {

// ---- the tolerance rule: the library's (qkv/runtime/check_reference.hpp), as in
// tests/compiler/differential.hpp --------------------------------------------------------
constexpr double kTolC = kToleranceC;
double machine_eps(DType d) { return machine_epsilon(d); }

using Fn = std::function<double(const DimBindings &)>;
Fn konst(double c) {
  return [c](const DimBindings &) { return c; };
}
Fn ext(const Dim &d) {
  std::string n = d.name;
  return [n](const DimBindings &b) { return static_cast<double>(b.at(n)); };
}
Fn plus(Fn a, Fn b) {
  return [a, b](const DimBindings &x) { return a(x) + b(x); };
}
Fn times(Fn a, Fn b) {
  return [a, b](const DimBindings &x) { return a(x) * b(x); };
}
Fn maxf(Fn a, Fn b) {
  return [a, b](const DimBindings &x) { return std::max(a(x), b(x)); };
}

// A value of the graph being built, with what the tolerance rule needs to know of it.
struct V {
  Value v;
  Fn red;  // the sum of the lengths of the reductions it went through (n - 1)
  Fn mag;  // a bound on |element|
  Fn big;  // M: a bound on the terms reductions added and the arguments of exp/sin/cos
  bool leaf = false;
};

class Rng {
public:
  explicit Rng(std::uint64_t seed) : r_(seed) {}
  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(r_); }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(r_) < p; }
  template <class T> const T &pick(const std::vector<T> &xs) {
    return xs[static_cast<std::size_t>(uniform(0, static_cast<int>(xs.size()) - 1))];
  }
  double real(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(r_); }

private:
  std::mt19937_64 r_;
};

// ---- random mod expressions ---------------------------------------------------------------

// Tensors a mod may load, made for one scores/attention node.
struct ModEnv {
  int rank = 4;                // of the scores (2: no b, h)
  std::vector<Value> captured; // what the loads below read
  // loads, each an expression with its magnitude bound
  std::vector<std::pair<Expr, double>> float_loads;
  std::vector<IntExpr> int_loads;
  double max_pos = 1; // the largest q/kv index + 1 (max bindings)
};

IntExpr rand_int(Rng &r, const ModEnv &env, int depth) {
  int k = r.uniform(0, depth <= 0 ? 5 : 11);
  auto b = detail::int_index_var(ExprOp::IndexB), h = detail::int_index_var(ExprOp::IndexH),
       q = detail::int_index_var(ExprOp::IndexQ), kv = detail::int_index_var(ExprOp::IndexKV);
  switch (k) {
  case 0: return q;
  case 1: return kv;
  case 2: return env.rank >= 3 ? h : IntExpr(r.uniform(-3, 3));
  case 3: return env.rank >= 4 ? b : IntExpr(r.uniform(-3, 3));
  case 4: return r.chance(0.5) ? len_q() : len_kv();
  case 5:
    if (!env.int_loads.empty() && r.chance(0.7))
      return r.pick(env.int_loads);
    return IntExpr(r.uniform(-5, 5));
  case 6: return rand_int(r, env, depth - 1) + rand_int(r, env, depth - 1);
  case 7: return rand_int(r, env, depth - 1) - rand_int(r, env, depth - 1);
  case 8: return rand_int(r, env, depth - 1) * IntExpr(r.uniform(-3, 3));
  case 9: {
    // a constant non-zero divisor: integer division by zero is a run-time error
    int d = r.uniform(1, 4) * (r.chance(0.3) ? -1 : 1);
    return r.chance(0.5) ? rand_int(r, env, depth - 1) / IntExpr(d)
                         : rand_int(r, env, depth - 1) % IntExpr(d);
  }
  case 10: {
    auto a = rand_int(r, env, depth - 1), c = rand_int(r, env, depth - 1);
    int w = r.uniform(0, 2);
    return w == 0 ? IntExpr(min(a, c)) : w == 1 ? IntExpr(max(a, c)) : abs(a - c);
  }
  default: break;
  }
  return IntExpr(select(rand_int(r, env, depth - 1) < rand_int(r, env, depth - 1),
                        rand_int(r, env, depth - 1), rand_int(r, env, depth - 1)));
}

BoolExpr rand_bool(Rng &r, const ModEnv &env, int depth) {
  int k = r.uniform(0, depth <= 0 ? 2 : 5);
  auto q = detail::int_index_var(ExprOp::IndexQ), kv = detail::int_index_var(ExprOp::IndexKV);
  switch (k) {
  case 0: return q >= kv;
  case 1: {
    int w = r.uniform(1, 4);
    return BoolExpr(sliding_window_mask(w).expr);
  }
  case 2: {
    auto a = rand_int(r, env, 1), b = rand_int(r, env, 1);
    switch (r.uniform(0, 5)) {
    case 0: return a < b;
    case 1: return a <= b;
    case 2: return a > b;
    case 3: return a >= b;
    case 4: return a == b;
    default: return a != b;
    }
  }
  case 3: return rand_bool(r, env, depth - 1) && rand_bool(r, env, depth - 1);
  case 4: return rand_bool(r, env, depth - 1) || rand_bool(r, env, depth - 1);
  default: return !rand_bool(r, env, depth - 1);
  }
}

// A float expression and a bound on its magnitude, given |s| <= smag.
std::pair<Expr, double> rand_float(Rng &r, const ModEnv &env, int depth, double smag) {
  Expr s = detail::index_var(ExprOp::Score);
  int k = r.uniform(0, depth <= 0 ? 3 : 10);
  switch (k) {
  case 0: return {s, smag};
  case 1: {
    double c = r.real(-2, 2);
    return {Expr(c), std::fabs(c)};
  }
  case 2: {
    // an integer expression converted: bounded by clamping into [-8, 8]
    auto i = rand_int(r, env, 1);
    return {to_float(IntExpr(max(IntExpr(-8), IntExpr(min(i, IntExpr(8)))))), 8};
  }
  case 3:
    if (!env.float_loads.empty())
      return r.pick(env.float_loads);
    return {s, smag};
  case 4: {
    auto [a, ma] = rand_float(r, env, depth - 1, smag);
    auto [b, mb] = rand_float(r, env, depth - 1, smag);
    return r.chance(0.5) ? std::pair{a + b, ma + mb} : std::pair{a - b, ma + mb};
  }
  case 5: {
    auto [a, ma] = rand_float(r, env, depth - 1, smag);
    double c = r.real(-1.5, 1.5);
    return {a * Expr(c), ma * std::fabs(c)};
  }
  case 6: {
    auto [a, ma] = rand_float(r, env, depth - 1, smag);
    double c = r.uniform(1, 4) * 5.0;
    return {Expr(c) * tanh(a / Expr(c)), std::min(c, ma)}; // a soft cap
  }
  case 7: {
    auto [a, ma] = rand_float(r, env, depth - 1, smag);
    switch (r.uniform(0, 3)) {
    case 0: return {exp(-abs(a)), 1};
    case 1: return {log(abs(a) + Expr(1.0)), std::log1p(ma)};
    case 2: return {sqrt(abs(a) + Expr(0.5)), std::sqrt(ma + 0.5)};
    default: return {pow(abs(a) + Expr(1.0), Expr(0.5)), std::sqrt(ma + 1)};
    }
  }
  case 8: {
    auto [a, ma] = rand_float(r, env, depth - 1, smag);
    auto [b, mb] = rand_float(r, env, depth - 1, smag);
    return {r.chance(0.5) ? min(a, b) : max(a, b), std::max(ma, mb)};
  }
  case 9: {
    auto [a, ma] = rand_float(r, env, depth - 1, smag);
    auto [b, mb] = rand_float(r, env, depth - 1, smag);
    return {select(rand_bool(r, env, 1), a, b), std::max(ma, mb)};
  }
  default: {
    // ALiBi-like: s + slope * (kv - q), the distance clamped
    auto [a, ma] = rand_float(r, env, depth - 1, smag);
    double c = r.real(-0.5, 0.5);
    auto d = detail::int_index_var(ExprOp::IndexKV) - detail::int_index_var(ExprOp::IndexQ);
    return {a + Expr(c) * to_float(d), ma + std::fabs(c) * env.max_pos};
  }
  }
}

// ---- the generator ------------------------------------------------------------------------

struct Fuzzed {
  std::unique_ptr<Graph> g;
  std::vector<DimBindings> shapes; // dynamic dims' extents, one run each
  std::vector<std::pair<std::string, V>> outputs;
  RandomRanges ranges;
  std::vector<std::string> log; // the builder calls, for the report
  CompileOptions options;       // sometimes another schedule, or recognition off
};

class Generator {
public:
  /// With `only`, every graph is of that dtype (the rest drawn as without it).
  Generator(std::uint64_t seed, std::optional<DType> only = std::nullopt) : r_(seed), only_(only) {}

  Fuzzed build(std::uint64_t seed) {
    f_.g = std::make_unique<Graph>("fuzz_" + std::to_string(seed));
    // f64 sometimes, f16 and bf16 sometimes (each node rounded to them, compiled and
    // interpreted), f32 mostly.
    double d = r_.real(0, 1);
    dtype_ = d < 0.15 ? DType::F64 : d < 0.25 ? DType::BF16 : d < 0.35 ? DType::F16 : DType::F32;
    if (only_)
      dtype_ = *only_;
    // The dims every graph starts from; more are made as ops need them.
    batch_ = r_.chance(0.6);
    B_ = new_dim("B", 1, 3, 0.6);
    L_ = new_dim("L", 1, 9, 0.6);
    D_ = new_dim("D", 1, 8, 0.4);
    if (r_.chance(0.15)) {
      // token ids into an embedding table: (B?, L) -> (B?, L, D)
      std::vector<Dim> ids_dims;
      if (batch_)
        ids_dims.push_back(B_);
      ids_dims.push_back(L_);
      Dim vocab = new_dim("V", 1, 7, 0);
      Value ids = g().input(name("ids"), r_.chance(0.5) ? DType::I32 : DType::I64, ids_dims);
      Value table = g().param(name("table"), dtype_, {vocab, D_});
      pool_.push_back(leafv(embedding(ids, table), 1));
      note("embedding");
    } else {
      std::vector<Dim> xd;
      if (batch_)
        xd.push_back(B_);
      xd.push_back(L_);
      xd.push_back(D_);
      pool_.push_back(fresh(xd, false));
    }
    if (r_.chance(0.4)) {
      // a second start: per-head tensors (B?, H, L, Dh)
      Dim H = new_dim("H", 1, 4, 0), Dh = new_dim("Dh", 1, 6, 0.2);
      std::vector<Dim> hd;
      if (batch_)
        hd.push_back(B_);
      hd.insert(hd.end(), {H, L_, Dh});
      pool_.push_back(fresh(hd, false));
    }
    int ops = r_.uniform(2, 7);
    for (int i = 0; i < ops; ++i)
      step();
    // outputs: the last value, and sometimes an earlier one
    std::vector<V> outs{pool_.back()};
    if (r_.chance(0.3)) {
      const V &o = r_.pick(pool_);
      if (!o.leaf && !(o.v == outs[0].v))
        outs.push_back(o);
    }
    for (std::size_t i = 0; i < outs.size(); ++i) {
      std::string n = "out" + std::to_string(i);
      g().output(n, outs[i].v);
      f_.outputs.push_back({n, outs[i]});
    }
    // Every schedule computes the interpreter's result: sometimes narrower vectors, one
    // or two threads, attention recognition off.
    if (r_.chance(0.25))
      f_.options.schedule.vector_bits = r_.pick(std::vector<int>{128, 256});
    if (r_.chance(0.25))
      f_.options.schedule.threads = r_.uniform(1, 2);
    f_.options.recognize_attention = !r_.chance(0.2);
    // a checked kernel of a valid graph must compute what the interpreter does, and
    // report nothing
    f_.options.checked = r_.chance(0.25);
    // two bindings of the dynamic dims, the second often the largest
    for (int s = 0; s < 2; ++s) {
      DimBindings b;
      for (const auto &[n, hi] : dyn_)
        b[n] = s == 1 && r_.chance(0.5) ? hi : r_.uniform(1, static_cast<int>(hi));
      f_.shapes.push_back(b);
    }
    return std::move(f_);
  }

private:
  Graph &g() { return *f_.g; }
  void note(const std::string &s) { f_.log.push_back(s); }
  std::string name(const std::string &base) { return base + std::to_string(counter_++); }

  // A dim with a random extent in [lo, hi], dynamic with probability p_dyn (its run-time
  // extents then lie in [1, hi]). Extents in bindings are bounded by hi.
  Dim new_dim(const std::string &base, int lo, int hi, double p_dyn) {
    std::string n = base == "B" || base == "L" || base == "D" ? base : name(base);
    // Sometimes a long one: past the kernels' vector widths, attention tiles and matmul
    // panels (16 floats, 48-row blocks, 64-column panels), where the edge cases are.
    if ((base == "L" || base == "S" || base == "D" || base == "N") && r_.chance(0.25))
      hi = r_.pick(std::vector<int>{17, 33, 70});
    if (r_.chance(p_dyn)) {
      dyn_[n] = hi;
      maxb_[n] = hi;
      return g().dim(n);
    }
    int e = r_.uniform(lo, hi);
    maxb_[n] = e;
    return g().dim(n, e);
  }
  DimBindings maxb() { return complete_dims(g(), dyn_max()); }
  DimBindings dyn_max() {
    DimBindings b;
    for (const auto &[n, hi] : dyn_)
      b[n] = hi;
    return b;
  }

  V leafv(Value v, double mag) {
    V x{v, konst(0), konst(mag), konst(1), true};
    return x;
  }
  V fresh(const std::vector<Dim> &dims, bool param, double lo = -1, double hi = 1) {
    std::string n = name(param ? "p" : "x");
    Value v = param ? g().param(n, dtype_, dims) : g().input(n, dtype_, dims);
    if (lo != -1 || hi != 1)
      f_.ranges[n] = {lo, hi};
    return leafv(v, std::max(std::fabs(lo), std::fabs(hi)));
  }
  // Keeps values near unit size so that later reductions' M stays honest and small.
  V tame(V x) {
    double m = x.mag(maxb());
    if (m > 8) {
      double f = 1.0 / m;
      Fn mag = x.mag;
      V y{scale(x.v, f), x.red, times(mag, konst(f)), maxf(x.big, mag)};
      note("scale(" + std::to_string(f) + ")");
      return y;
    }
    return x;
  }
  // M after an op whose input was x: x's own M and its magnitude.
  static Fn big_of(const V &x) { return maxf(x.big, x.mag); }

  V &pick_float(int min_rank = 1, int max_rank = 99) {
    std::vector<std::size_t> ok;
    for (std::size_t i = 0; i < pool_.size(); ++i)
      if (is_float(pool_[i].v.dtype()) && pool_[i].v.rank() >= min_rank &&
          pool_[i].v.rank() <= max_rank)
        ok.push_back(i);
    if (ok.empty())
      return pool_.back();
    // prefer recent values: deeper graphs
    std::size_t i = r_.chance(0.6) ? ok.back() : r_.pick(ok);
    return pool_[i];
  }

  void push(V x) { pool_.push_back(tame(std::move(x))); }

  void step() {
    for (int tries = 0; tries < 20; ++tries) {
      int op = r_.uniform(0, 17);
      if (try_op(op))
        return;
    }
  }

  // The pool value(s) with exactly these dims, or a fresh input with them.
  V same_dims_operand(const std::vector<Dim> &dims) {
    std::vector<V> ok;
    for (const V &p : pool_)
      if (is_float(p.v.dtype()) && p.v.dims() == dims)
        ok.push_back(p);
    if (!ok.empty() && r_.chance(0.5))
      return r_.pick(ok);
    return fresh(dims, r_.chance(0.3));
  }

  bool try_op(int op) {
    switch (op) {
    case 0: { // elementwise activations, softcap and scale
      V x = pick_float();
      int k = r_.uniform(0, 6);
      Value y;
      Fn mag = x.mag;
      if (k == 0) {
        bool approx = r_.chance(0.5);
        y = gelu(x.v, approx);
        note(approx ? "gelu(approximate)" : "gelu");
      } else if (k == 1) {
        y = silu(x.v);
        note("silu");
      } else if (k == 2) {
        double a = r_.pick(std::vector<double>{0.5, 1.0, 1.7});
        y = elu(x.v, a);
        mag = maxf(mag, konst(a));
        note("elu");
      } else if (k == 3) {
        y = softplus(x.v); // |softplus(x)| <= |x| + log 2
        mag = plus(mag, konst(1));
        note("softplus");
      } else if (k == 4) {
        y = sigmoid(x.v); // in (0, 1)
        mag = konst(1);
        note("sigmoid");
      } else if (k == 5) {
        y = relu(x.v); // |relu(x)| <= |x|
        note("relu");
      } else if (r_.chance(0.3)) { // k == 6; the draw only here keeps other graphs as they were
        y = softcap(x.v, r_.pick(std::vector<double>{0.5, 3, 30})); // |softcap(x)| <= |x|
        note("softcap");
      } else {
        double f = r_.pick(std::vector<double>{-2, -0.5, 0.25, 0.7, 1.5, 3});
        y = scale(x.v, f);
        mag = times(mag, konst(std::fabs(f)));
        note("scale");
      }
      push({y, x.red, mag, big_of(x)});
      return true;
    }
    case 1: { // softmax over a random axis
      V x = pick_float();
      int ax = r_.uniform(0, x.v.rank() - 1);
      bool by_name = r_.chance(0.3);
      Dim d = x.v.dims()[ax];
      // by name only when the name is on one axis
      if (by_name && std::count(x.v.dims().begin(), x.v.dims().end(), d) != 1)
        by_name = false;
      Value y = by_name ? softmax(x.v, d.name) : softmax(x.v, r_.chance(0.5) ? ax : ax - x.v.rank());
      note("softmax");
      push({y, plus(x.red, ext(d)), konst(1), big_of(x)});
      return true;
    }
    case 2: { // layer_norm / rms_norm, with and without gamma/beta
      V x = pick_float();
      Dim d = x.v.dims().back();
      double eps = r_.pick(std::vector<double>{1e-5, 1e-6, 1e-2});
      bool affine = r_.chance(0.5);
      bool ln = r_.chance(0.5);
      Value y;
      Fn mag = [d](const DimBindings &b) { return std::sqrt(static_cast<double>(b.at(d.name))); };
      if (ln) {
        if (affine) {
          y = layer_norm(x.v, fresh({d}, true).v, fresh({d}, true).v, eps);
          mag = plus(mag, konst(1));
        } else {
          y = layer_norm(x.v, eps);
        }
      } else {
        y = affine ? rms_norm(x.v, fresh({d}, true).v, eps) : rms_norm(x.v, eps);
      }
      note(ln ? "layer_norm" : "rms_norm");
      Fn red = plus(x.red, times(konst(ln ? 2 : 1), ext(d)));
      push({y, red, mag, big_of(x)});
      return true;
    }
    case 3: { // transpose
      V x = pick_float(2);
      if (x.v.rank() < 2)
        return false;
      int a = r_.uniform(0, x.v.rank() - 1), b = r_.uniform(0, x.v.rank() - 1);
      Value y = r_.chance(0.3) ? transpose(x.v) : transpose(x.v, a, b - x.v.rank());
      note("transpose");
      push({y, x.red, x.mag, x.big});
      return true;
    }
    case 4: { // add/sub/mul/residual/swiglu/geglu with equal dims, or broadcast a suffix
      V x = pick_float();
      int k = r_.uniform(0, 5);
      std::vector<Dim> dims = x.v.dims();
      if (k <= 2 && r_.chance(0.4)) {
        // the shorter operand ends the longer one
        int keep = r_.uniform(1, x.v.rank());
        dims.erase(dims.begin(), dims.end() - keep);
      }
      V o = same_dims_operand(dims);
      bool swap = r_.chance(0.5);
      Value a = swap ? o.v : x.v, b = swap ? x.v : o.v;
      Value y;
      Fn mag;
      if (k == 0) {
        y = add(a, b);
        mag = plus(x.mag, o.mag);
        note("add");
      } else if (k == 1) {
        y = sub(a, b);
        mag = plus(x.mag, o.mag);
        note("sub");
      } else if (k == 2) {
        y = mul(a, b);
        mag = times(x.mag, o.mag);
        note("mul");
      } else if (k == 3) {
        if (o.v.dims() != x.v.dims())
          return false;
        y = residual(a, b);
        mag = plus(x.mag, o.mag);
        note("residual");
      } else if (k == 4) {
        if (o.v.dims() != x.v.dims())
          return false;
        y = swiglu(a, b);
        mag = times(swap ? x.mag : o.mag, plus(swap ? o.mag : x.mag, konst(0.3)));
        note("swiglu");
      } else {
        if (o.v.dims() != x.v.dims())
          return false;
        y = geglu(a, b); // |gelu(g)| <= |g| + 0.17
        mag = times(swap ? x.mag : o.mag, plus(swap ? o.mag : x.mag, konst(0.2)));
        note("geglu");
      }
      push({y, plus(x.red, o.red), mag, maxf(big_of(x), big_of(o))});
      return true;
    }
    case 5: { // div by an input kept away from zero
      V x = pick_float();
      std::vector<Dim> dims = x.v.dims();
      if (r_.chance(0.4))
        dims.erase(dims.begin(), dims.end() - r_.uniform(1, x.v.rank()));
      V d = fresh(dims, r_.chance(0.3), 0.5, 1.5);
      note("div");
      push({div(x.v, d.v), x.red, times(x.mag, konst(2)), big_of(x)});
      return true;
    }
    case 6: { // matmul: against a weight, a batched input, a 2-D left side, or x^T
      V x = pick_float(2);
      if (x.v.rank() < 2)
        return false;
      const std::vector<Dim> dims = x.v.dims();
      Dim K = dims.back();
      int k = r_.uniform(0, 3);
      if (k == 3) {
        // e (M', K') . x with x (..., K', N): a 2-D left side broadcasts
        if (x.v.rank() < 3)
          return false;
        Dim Kp = dims[dims.size() - 2];
        V e = fresh({new_dim("M", 1, 5, 0.3), Kp}, true);
        note("matmul(2-D lhs)");
        push({matmul(e.v, x.v), plus(x.red, ext(Kp)), times(ext(Kp), x.mag), big_of(x)});
        return true;
      }
      V b;
      if (k == 0) {
        b = fresh({K, new_dim("N", 1, 6, 0.3)}, true);
      } else if (k == 1) {
        std::vector<Dim> bd(dims.begin(), dims.end() - 2);
        bd.push_back(K);
        bd.push_back(new_dim("N", 1, 6, 0.3));
        b = fresh(bd, false);
      } else {
        // scores-like: x . x'^T with x' of the same dims
        V o = same_dims_operand(dims);
        b = {transpose(o.v), o.red, o.mag, o.big};
      }
      note("matmul");
      push({matmul(x.v, b.v), plus(plus(x.red, b.red), ext(K)),
            times(ext(K), times(x.mag, b.mag)), maxf(big_of(x), maxf(big_of(b), times(x.mag, b.mag)))});
      return true;
    }
    case 7: { // linear, with and without bias
      V x = pick_float();
      Dim K = x.v.dims().back();
      Dim N = new_dim("N", 1, 6, 0.3);
      V w = fresh({K, N}, true);
      bool bias = r_.chance(0.5);
      Value y = bias ? linear(x.v, w.v, fresh({N}, true).v) : linear(x.v, w.v);
      note(bias ? "linear(bias)" : "linear");
      Fn mag = plus(times(ext(K), x.mag), konst(bias ? 1 : 0));
      push({y, plus(x.red, ext(K)), mag, big_of(x)});
      return true;
    }
    case 8: { // split_heads
      V x = pick_float(2);
      if (x.v.rank() < 2)
        return false;
      Dim last = x.v.dims().back();
      if (last.is_dynamic())
        return false;
      std::vector<int> divs;
      for (int h = 1; h <= last.extent; ++h)
        if (last.extent % h == 0)
          divs.push_back(h);
      int h = r_.pick(divs);
      Dim H = g().dim(name("Hs"), h), Dh = g().dim(name("Ds"), last.extent / h);
      maxb_[H.name] = H.extent;
      maxb_[Dh.name] = Dh.extent;
      note("split_heads");
      push({split_heads(x.v, H, Dh), x.red, x.mag, x.big});
      return true;
    }
    case 9: { // merge_heads, sometimes naming the result's dim
      V x = pick_float(3);
      if (x.v.rank() < 3)
        return false;
      const std::vector<Dim> d = x.v.dims();
      Dim h = d[d.size() - 3], dh = d.back();
      Value y;
      if (h.is_static() && dh.is_static() && r_.chance(0.4)) {
        Dim out = g().dim(name("Mo"), h.extent * dh.extent);
        y = merge_heads(x.v, out);
      } else {
        y = merge_heads(x.v);
      }
      note("merge_heads");
      push({y, x.red, x.mag, x.big});
      return true;
    }
    case 10: { // concat along a random axis with a fresh part (or itself)
      V x = pick_float();
      int ax = r_.uniform(0, x.v.rank() - 1);
      std::vector<Value> parts{x.v};
      Fn mag = x.mag, red = x.red, big = x.big;
      int n = r_.uniform(1, 2);
      for (int i = 0; i < n; ++i) {
        if (r_.chance(0.3)) {
          parts.push_back(x.v);
        } else {
          std::vector<Dim> dims = x.v.dims();
          dims[ax] = new_dim("C", 1, 4, 0.4);
          V o = fresh(dims, false);
          parts.push_back(o.v);
          mag = maxf(mag, o.mag);
        }
      }
      Value y;
      bool named = false;
      bool all_static = std::all_of(parts.begin(), parts.end(),
                                    [&](const Value &p) { return p.dims()[ax].is_static(); });
      if (all_static && r_.chance(0.3)) {
        std::int64_t e = 0;
        for (const Value &p : parts)
          e += p.dims()[ax].extent;
        y = concat(parts, ax, g().dim(name("Co"), e));
        named = true;
      } else {
        y = concat(parts, r_.chance(0.5) ? ax : ax - x.v.rank());
      }
      note(named ? "concat(named)" : "concat");
      push({y, red, mag, big});
      return true;
    }
    case 11: { // mask (then softmax over the masked axis) or score_mod
      V x = pick_float(2, 4);
      if (x.v.rank() < 2 || x.v.rank() > 4)
        return false;
      ModEnv env = mod_env(x.v.dims(), x.v.rank());
      if (r_.chance(0.5)) {
        BoolExpr m = rand_bool(r_, env, 2);
        Value y = mask(x.v, MaskFn{m.ptr()});
        note("mask " + m.str());
        Dim last = x.v.dims().back();
        push({softmax(y, -1), plus(x.red, ext(last)), konst(1), big_of(x)});
        note("softmax");
      } else {
        double smag = x.mag(maxb());
        auto [e, m] = rand_float(r_, env, 2, smag);
        // the bound m is for the max bindings: it holds for every smaller one
        note("score_mod " + e.str());
        push({score_mod(x.v, ScoreFn{e.ptr()}), x.red, konst(m), maxf(big_of(x), konst(m))});
      }
      return true;
    }
    case 12: case 13: { // attention (self or cross, MHA/GQA/MQA, scale, mask, score_mod)
      V x = pick_float(2, 4);
      if (x.v.rank() < 2 || x.v.rank() > 4)
        return false;
      const std::vector<Dim> qd = x.v.dims();
      int r = x.v.rank();
      Dim Dq = qd.back();
      bool self = r_.chance(0.4);
      Dim S = self ? qd[r - 2] : new_dim("S", 1, 9, 0.6);
      std::vector<Dim> kd = qd;
      kd[r - 2] = S;
      if (r >= 3 && !self && qd[r - 3].is_static() && r_.chance(0.5)) {
        // grouped-query: fewer kv heads dividing the query heads
        std::int64_t hq = qd[r - 3].extent;
        std::vector<int> divs;
        for (int h = 1; h <= hq; ++h)
          if (hq % h == 0)
            divs.push_back(h);
        int hk = r_.pick(divs);
        if (hk != hq) {
          Dim Hk = g().dim(name("Hk"), hk);
          maxb_[Hk.name] = hk;
          kd[r - 3] = Hk;
        }
      }
      std::vector<Dim> vd = kd;
      if (r_.chance(0.4))
        vd[r - 1] = new_dim("Dv", 1, 6, 0.3);
      V k = self && r_.chance(0.5) ? x : fresh(kd, false);
      V v = self && r_.chance(0.5) && vd == qd ? x : fresh(vd, false);
      // the tensors mods load exist before the op that captures them
      ModEnv env = mod_env(qd, r, &S);
      Attention a = attention(x.v, k.v, v.v);
      std::string what = "attention";
      double sc = 0;
      bool has_scale = r_.chance(0.3);
      if (has_scale) {
        sc = r_.pick(std::vector<double>{0.05, 0.3, 1.0, -0.5});
        a.scale(sc);
        what += " scale";
      }
      if (r_.chance(0.5)) {
        BoolExpr m = rand_bool(r_, env, 2);
        a.mask(MaskFn{m.ptr()});
        what += " mask " + m.str();
      }
      // score magnitude: |scale| * Dh * |q| * |k| (scale defaults to 1/sqrt(Dh))
      DimBindings mb = maxb();
      double dq = static_cast<double>(mb.at(Dq.name));
      double smag = (has_scale ? std::fabs(sc) : 1.0) * dq * x.mag(mb) * k.mag(mb);
      double score_bound = smag;
      if (r_.chance(0.4)) {
        auto [e, m] = rand_float(r_, env, 2, smag);
        a.score_mod(ScoreFn{e.ptr()});
        score_bound = std::max(score_bound, m);
        what += " score_mod " + e.str();
      }
      note(what);
      Fn red = plus(plus(plus(x.red, k.red), v.red), plus(ext(Dq), ext(S)));
      Fn big = maxf(maxf(big_of(x), maxf(big_of(k), big_of(v))),
                    maxf(konst(score_bound), times(x.mag, k.mag)));
      push({a.value(), red, v.mag, big});
      return true;
    }
    case 14: { // linformer_project along the second-to-last axis
      V x = pick_float(2);
      if (x.v.rank() < 2)
        return false;
      Dim S = x.v.dims()[x.v.rank() - 2];
      V e = fresh({new_dim("Kp", 1, 4, 0.3), S}, true);
      note("linformer_project");
      push({linformer_project(x.v, e.v), plus(x.red, ext(S)), times(ext(S), x.mag), big_of(x)});
      return true;
    }
    case 15: { // linear attention with a fresh k, v
      V x = pick_float(2, 4);
      if (x.v.rank() < 2 || x.v.rank() > 4)
        return false;
      int r = x.v.rank();
      std::vector<Dim> kd = x.v.dims();
      Dim S = r_.chance(0.5) ? kd[r - 2] : new_dim("S", 1, 9, 0.6);
      kd[r - 2] = S;
      V k = fresh(kd, false), v = fresh(kd, false);
      // elu+1 only: relu's normaliser can be exactly 0 (see docs/testing.md)
      FeatureMap phi = FeatureMap::EluPlusOne;
      note("linear_attention");
      Dim Dq = kd.back();
      Fn red = plus(x.red, times(konst(2), plus(ext(Dq), ext(S))));
      push({linear_attention(x.v, k.v, v.v, phi), red, v.mag,
            maxf(big_of(x), maxf(plus(x.mag, konst(1)), plus(k.mag, konst(1))))});
      return true;
    }
    case 16: { // sinusoidal_pe
      V x = pick_float(2);
      if (x.v.rank() < 2)
        return false;
      std::int64_t off = r_.chance(0.5) ? 0 : r_.uniform(1, 20);
      double base = r_.pick(std::vector<double>{10000, 100, 2});
      Dim P = x.v.dims()[x.v.rank() - 2];
      note("sinusoidal_pe");
      Fn angle = plus(ext(P), konst(static_cast<double>(off)));
      push({sinusoidal_pe(x.v, base, off), x.red, plus(x.mag, konst(1)), maxf(big_of(x), angle)});
      return true;
    }
    default: { // rope (needs a static even last dim), with an offset or a positions tensor
      V x = pick_float(2);
      if (x.v.rank() < 2)
        return false;
      Dim last = x.v.dims().back();
      if (last.is_dynamic() || last.extent % 2 != 0)
        return false;
      RopeOptions o;
      o.interleaved = r_.chance(0.5);
      o.base = r_.pick(std::vector<double>{10000, 500});
      Dim P = x.v.dims()[x.v.rank() - 2];
      Value y;
      Fn angle = ext(P);
      if (r_.chance(0.4)) {
        std::vector<Dim> pd{P};
        if (x.v.rank() >= 3 && r_.chance(0.5))
          pd.insert(pd.begin(), x.v.dims()[0]);
        std::string n = name("pos");
        Value pos = g().input(n, r_.chance(0.5) ? DType::I32 : DType::I64, pd);
        f_.ranges[n] = {0, 50};
        y = rope(x.v, pos, o);
        angle = konst(50);
        note("rope(positions)");
      } else {
        o.offset = r_.chance(0.5) ? 0 : r_.uniform(1, 30);
        angle = plus(angle, konst(static_cast<double>(o.offset)));
        y = rope(x.v, o);
        note("rope");
      }
      push({y, x.red, times(x.mag, konst(std::sqrt(2.0))), maxf(big_of(x), angle)});
      return true;
    }
    }
  }

  // Tensors a mod over scores with these dims may load, indexed only within range.
  ModEnv mod_env(const std::vector<Dim> dims, int r, const Dim *kv_dim = nullptr) {
    ModEnv env;
    env.rank = r;
    Dim qd = dims[r - 2], kvd = kv_dim ? *kv_dim : dims[r - 1];
    DimBindings mb = maxb();
    env.max_pos = static_cast<double>(std::max(mb.at(qd.name), mb.at(kvd.name)));
    auto q = detail::int_index_var(ExprOp::IndexQ), kv = detail::int_index_var(ExprOp::IndexKV);
    if (r_.chance(0.4)) {
      // document ids on both axes (packed sequences)
      std::string a = name("docq"), b = name("dockv");
      Value dq = g().input(a, DType::I32, {qd});
      Value dk = g().input(b, DType::I64, {kvd});
      env.int_loads.push_back(IntExpr(dq[q].ptr()));
      env.int_loads.push_back(IntExpr(dk[kv].ptr()));
    }
    if (r >= 3 && r_.chance(0.4)) {
      // per-head slopes
      Value s = g().param(name("slope"), dtype_, {dims[r - 3]});
      env.float_loads.push_back({s[detail::int_index_var(ExprOp::IndexH)], 1});
    }
    if (r_.chance(0.3)) {
      // a learned (q, kv) bias
      Value t = g().param(name("bias"), dtype_, {qd, kvd});
      env.float_loads.push_back({t(q, kv), 1});
    }
    return env;
  }

  Rng r_;
  Fuzzed f_;
  std::vector<V> pool_;
  DType dtype_ = DType::F32;
  std::optional<DType> only_;
  bool batch_ = true;
  Dim B_, L_, D_;
  std::map<std::string, std::int64_t> dyn_;  // dynamic dims -> largest run-time extent
  std::map<std::string, std::int64_t> maxb_; // unused by checks; kept for debugging
  int counter_ = 0;
};

// ---- checking one graph -------------------------------------------------------------------

struct Failure {
  std::string what;
};

// The M a layer norm among output `out`'s ancestors takes from the data, as the library's
// rule takes it (qkv::layer_norm_magnitude): rows of close values amplify the rounding of
// x - mean past anything the static bounds, which see ranges only, can say.
double norm_magnitude(const Graph &g, const std::vector<Tensor> &vals, NodeId out) {
  std::vector<bool> live(g.nodes().size(), false);
  live[out] = true;
  double worst = 0;
  for (std::size_t i = g.nodes().size(); i-- > 0;) { // inputs come before their users
    if (!live[i])
      continue;
    const Node &n = g.nodes()[i];
    for (NodeId x : n.inputs)
      live[x] = true;
    if (n.op == OpKind::LayerNorm)
      worst = std::max(worst, layer_norm_magnitude(n, vals));
  }
  return worst;
}

// Returns an empty string when the graph passes, else what went wrong.
std::string check_graph(const Fuzzed &f, std::uint64_t seed) {
  const Graph &g = *f.g;
  Kernel k = [&] {
    try {
      return compile(g, Target::host(), f.options);
    } catch (const Error &e) {
      throw Failure{std::string("compile failed: ") + e.what()};
    }
  }();
  for (std::size_t s = 0; s < f.shapes.size(); ++s) {
    const DimBindings &dyn = f.shapes[s];
    DimBindings full = complete_dims(g, dyn);
    TensorMap in = random_inputs(g, dyn, seed * 7 + s, f.ranges);
    TensorMap saved;
    for (const auto &[n, t] : in)
      saved.emplace(n, t.clone());
    TensorMap ref_in;
    for (const auto &[n, t] : in)
      ref_in.emplace(n, t.clone());
    std::vector<Tensor> vals = reference::run_all(g, ref_in);
    TensorMap want;
    std::map<std::string, NodeId> node_of;
    for (const auto &[name, id] : g.outputs())
      want.emplace(name, vals[id]), node_of.emplace(name, id);
    TensorMap got = k.run(in);
    std::string where = " (shape " + std::to_string(s) + ":";
    for (const auto &[n, e] : dyn)
      where += " " + n + "=" + std::to_string(e);
    where += ")";
    for (const auto &[n, t] : saved)
      if (std::memcmp(t.data(), in.at(n).data(), t.nbytes()) != 0)
        return "the kernel changed its input '" + n + "'" + where;
    for (const auto &[name, v] : f.outputs) {
      const Tensor &w = want.at(name);
      for (std::int64_t i = 0; i < w.numel(); ++i)
        if (!std::isfinite(w.get(i)))
          return "the reference output '" + name + "' is " + std::to_string(w.get(i)) +
                 " at flat index " + std::to_string(i) + where +
                 ": a generator bug (it must make finite graphs)";
      double n = 1 + v.red(full),
             M = std::max(v.big(full), norm_magnitude(g, vals, node_of.at(name)));
      double r = kTolC * machine_eps(got.at(name).dtype()) * n;
      Comparison c = compare(got.at(name), w, r * M, r);
      if (!c.ok)
        return "output '" + name + "' (n = " + std::to_string(n) + ", M = " + std::to_string(M) +
               ")" + where + ": " + c.message;
    }
  }
  return "";
}

// ---- invalid builder calls ----------------------------------------------------------------

// Each returns a description of the misuse it made; the call must throw qkv::Error.
using Misuse = std::function<std::string(Rng &)>;

std::vector<Misuse> misuses() {
  auto ext = [](Rng &r) { return static_cast<std::int64_t>(r.uniform(1, 9)); };
  std::vector<Misuse> m;
  // matmul: contraction dims differ
  m.push_back([=](Rng &r) {
    Graph g;
    Dim M = g.dim("M", ext(r)), K = g.dim("K", ext(r)), J = g.dim("J"), N = g.dim("N");
    matmul(g.input("a", DType::F32, {M, K}), g.input("b", DType::F32, {J, N}));
    return std::string("matmul K vs J");
  });
  // matmul: batch dims differ
  m.push_back([=](Rng &r) {
    Graph g;
    Dim B = g.dim("B"), C = g.dim("C", ext(r)), M = g.dim("M"), K = g.dim("K"), N = g.dim("N");
    matmul(g.input("a", DType::F32, {B, M, K}), g.input("b", DType::F32, {C, K, N}));
    return std::string("matmul batch B vs C");
  });
  // matmul: rank 1
  m.push_back([=](Rng &r) {
    Graph g;
    Dim K = g.dim("K", ext(r)), N = g.dim("N");
    matmul(g.input("a", DType::F32, {K}), g.input("b", DType::F32, {K, N}));
    return std::string("matmul rank 1");
  });
  // matmul / add: dtypes differ
  m.push_back([=](Rng &r) {
    Graph g;
    Dim M = g.dim("M"), K = g.dim("K");
    Value a = g.input("a", DType::F32, {M, K}), b = g.input("b", DType::F64, {M, K});
    int k = r.uniform(0, 3);
    if (k == 0)
      add(a, b);
    else if (k == 1)
      mul(a, b);
    else if (k == 2)
      swiglu(a, b);
    else
      matmul(a, transpose(b));
    return std::string("f32 with f64");
  });
  // float ops on integer tensors
  m.push_back([=](Rng &r) {
    Graph g;
    Dim L = g.dim("L"), D = g.dim("D", 2 * ext(r));
    Value x = g.input("x", r.chance(0.5) ? DType::I32 : DType::I64, {L, D});
    switch (r.uniform(0, 8)) {
    case 0: softmax(x); break;
    case 1: gelu(x); break;
    case 2: layer_norm(x); break;
    case 3: rms_norm(x); break;
    case 4: scale(x, 2); break;
    case 5: rope(x); break;
    case 6: sinusoidal_pe(x); break;
    case 7: attention(x, x, x); break;
    default: transpose(softmax(x)); break;
    }
    return std::string("float op on an integer tensor");
  });
  // elementwise: shapes do not match
  m.push_back([=](Rng &r) {
    Graph g;
    Dim L = g.dim("L"), D = g.dim("D", ext(r)), E = g.dim("E", ext(r));
    Value a = g.input("a", DType::F32, {L, D}), b = g.input("b", DType::F32, {L, E});
    switch (r.uniform(0, 4)) {
    case 0: add(a, b); break;
    case 1: sub(a, b); break;
    case 2: div(a, b); break;
    case 3: residual(a, b); break;
    default: swiglu(a, b); break;
    }
    return std::string("elementwise (L, D) with (L, E)");
  });
  // residual: a broadcast is not a residual
  m.push_back([=](Rng &r) {
    Graph g;
    Dim L = g.dim("L"), D = g.dim("D", ext(r));
    residual(g.input("a", DType::F32, {L, D}), g.input("b", DType::F32, {D}));
    return std::string("residual with a broadcast");
  });
  // axes out of range
  m.push_back([=](Rng &r) {
    Graph g;
    Dim L = g.dim("L"), D = g.dim("D", ext(r));
    Value x = g.input("x", DType::F32, {L, D});
    std::int64_t bad = r.chance(0.5) ? r.uniform(2, 9) : -r.uniform(3, 9);
    switch (r.uniform(0, 3)) {
    case 0: softmax(x, bad); break;
    case 1: transpose(x, bad, 0); break;
    case 2: transpose(x, 0, bad); break;
    default: concat({x, x}, bad); break;
    }
    return "axis " + std::to_string(bad) + " of a rank-2 tensor";
  });
  // dims named that are not there, or on two axes
  m.push_back([=](Rng &r) {
    Graph g;
    Dim L = g.dim("L"), D = g.dim("D", ext(r));
    if (r.chance(0.5)) {
      Value x = g.input("x", DType::F32, {L, D});
      if (r.chance(0.5))
        softmax(x, "Q");
      else
        transpose(x, "L", "Q");
    } else {
      softmax(g.input("x", DType::F32, {L, L}), "L");
    }
    return std::string("no such dim / dim on two axes");
  });
  // split_heads: wrong product, dynamic last dim, dynamic heads
  m.push_back([=](Rng &r) {
    Graph g;
    Dim L = g.dim("L");
    int h = r.uniform(2, 4), dh = r.uniform(1, 5);
    int k = r.uniform(0, 2);
    if (k == 0) {
      Dim D = g.dim("D", h * dh + r.uniform(1, 3));
      split_heads(g.input("x", DType::F32, {L, D}), g.dim("H", h), g.dim("Dh", dh));
    } else if (k == 1) {
      split_heads(g.input("x", DType::F32, {L, g.dim("D")}), g.dim("H", h), g.dim("Dh", dh));
    } else {
      Dim D = g.dim("D", h * dh);
      split_heads(g.input("x", DType::F32, {L, D}), g.dim("H"), g.dim("Dh", dh));
    }
    return std::string("split_heads with bad heads");
  });
  // split/merge_heads: rank too low; merge into a wrong dim
  m.push_back([=](Rng &r) {
    Graph g;
    Dim H = g.dim("H", 2), L = g.dim("L"), Dh = g.dim("Dh", ext(r));
    int k = r.uniform(0, 2);
    if (k == 0)
      merge_heads(g.input("x", DType::F32, {L, Dh}));
    else if (k == 1)
      split_heads(g.input("x", DType::F32, {Dh}), H, g.dim("Dx", 1));
    else
      merge_heads(g.input("x", DType::F32, {H, L, Dh}), g.dim("O", 2 * Dh.extent + 1));
    return std::string("split/merge_heads rank or out dim");
  });
  // concat: rank or other dims differ, wrong out dim
  m.push_back([=](Rng &r) {
    Graph g;
    Dim L = g.dim("L"), D = g.dim("D", ext(r)), E = g.dim("E", ext(r));
    Value a = g.input("a", DType::F32, {L, D});
    int k = r.uniform(0, 3);
    if (k == 0)
      concat({a, g.input("b", DType::F32, {L})}, 0);
    else if (k == 1)
      concat({a, g.input("b", DType::F32, {E, E})}, -1);
    else if (k == 2)
      concat({a, g.input("b", DType::F32, {L, E})}, -1, g.dim("O", D.extent + E.extent + 1));
    else
      concat({}, 0);
    return std::string("concat mismatch");
  });
  // attention: ranks, head dims, sequence dims, batch dims, heads
  m.push_back([=](Rng &r) {
    Graph g;
    Dim B = g.dim("B"), C = g.dim("C"), L = g.dim("L"), S = g.dim("S"), T = g.dim("T");
    Dim Dh = g.dim("Dh", ext(r)), De = g.dim("De", Dh.extent + 1);
    int hq = r.uniform(2, 6), hk = r.uniform(1, hq - 1);
    while (hq % hk == 0)
      hk = hk == 1 ? -1 : hk - 1;
    Dim H = g.dim("H", hq), Hk = g.dim("Hk", hk > 0 ? hk : hq + 1), Hd = g.dim("Hd");
    auto in = [&](const char *n, std::vector<Dim> d) { return g.input(n, DType::F32, d); };
    switch (r.uniform(0, 7)) {
    case 0: attention(in("q", {L, Dh}), in("k", {H, S, Dh}), in("v", {H, S, Dh})); break;
    case 1: attention(in("q", {L, Dh}), in("k", {S, De}), in("v", {S, Dh})); break;
    case 2: attention(in("q", {L, Dh}), in("k", {S, Dh}), in("v", {T, Dh})); break;
    case 3:
      attention(in("q", {B, H, L, Dh}), in("k", {C, H, S, Dh}), in("v", {C, H, S, Dh}));
      break;
    case 4: attention(in("q", {H, L, Dh}), in("k", {Hk, S, Dh}), in("v", {Hk, S, Dh})); break;
    case 5: attention(in("q", {Hd, L, Dh}), in("k", {H, S, Dh}), in("v", {H, S, Dh})); break;
    case 6: attention(in("q", {Dh}), in("k", {Dh}), in("v", {Dh})); break;
    default:
      linear_attention(in("q", {B, B, H, L, Dh}), in("k", {B, B, H, S, Dh}),
                       in("v", {B, B, H, S, Dh}));
      break;
    }
    return std::string("attention shape misuse");
  });
  // mods of the wrong type, loads with wrong index counts or from foreign tensors
  m.push_back([=](Rng &r) {
    Graph g;
    Dim H = g.dim("H", ext(r)), L = g.dim("L"), Dh = g.dim("Dh", ext(r));
    Value q = g.input("q", DType::F32, {H, L, Dh});
    Value slopes = g.param("slopes", DType::F32, {H});
    Value table = g.param("table", DType::F32, {L, L});
    auto qi = detail::int_index_var(ExprOp::IndexQ), kv = detail::int_index_var(ExprOp::IndexKV);
    auto hi = detail::int_index_var(ExprOp::IndexH);
    Expr sc = detail::index_var(ExprOp::Score);
    Graph other;
    Value foreign = other.param("f", DType::F32, {other.dim("H", H.extent)});
    switch (r.uniform(0, 8)) {
    case 0: attention(q, q, q).mask(MaskFn{(Expr(qi) - kv).ptr()}); break;
    case 1: attention(q, q, q).score_mod(ScoreFn{(qi >= kv).ptr()}); break;
    case 2: attention(q, q, q).mask(MaskFn{(sc > Expr(0.0)).ptr()}); break;
    case 3: attention(q, q, q).score_mod(ScoreFn{(sc + slopes.load({hi, qi})).ptr()}); break;
    case 4: attention(q, q, q).score_mod(ScoreFn{(sc + table.load({qi})).ptr()}); break;
    case 5: attention(q, q, q).score_mod(ScoreFn{(sc + foreign[hi]).ptr()}); break;
    case 6: mask(matmul(q, transpose(q)), MaskFn{(sc + Expr(1.0)).ptr()}); break;
    case 7: score_mod(matmul(q, transpose(q)), ScoreFn{(qi < kv).ptr()}); break;
    default: slopes.load({to_float(Expr(hi))}); break;
    }
    return std::string("mod misuse");
  });
  // an attention's mods set twice, or after the result was used
  m.push_back([=](Rng &r) {
    Graph g;
    Dim L = g.dim("L"), Dh = g.dim("Dh", ext(r));
    Value q = g.input("q", DType::F32, {L, Dh});
    Attention a = attention(q, q, q);
    if (r.chance(0.5)) {
      // two masks combine (&&); two score_mods are an error
      a.score_mod([](auto s, auto, auto, auto, auto) { return s; });
      a.score_mod([](auto s, auto, auto, auto, auto) { return s * 2.0; });
    } else {
      Value y = softmax(a.value());
      (void)y;
      a.scale(0.5);
    }
    return std::string("attention score_mod twice / after use");
  });
  // norms: gamma/beta of the wrong dim; negative eps
  m.push_back([=](Rng &r) {
    Graph g;
    Dim L = g.dim("L"), D = g.dim("D", ext(r)), E = g.dim("E");
    Value x = g.input("x", DType::F32, {L, D});
    switch (r.uniform(0, 3)) {
    case 0: layer_norm(x, g.param("g", DType::F32, {E}), g.param("b", DType::F32, {D})); break;
    case 1: rms_norm(x, g.param("g", DType::F32, {L, D})); break;
    case 2: layer_norm(x, -1e-5); break;
    default: rms_norm(x, g.param("g", DType::F64, {D})); break;
    }
    return std::string("norm misuse");
  });
  // rope / sinusoidal_pe: odd or dynamic last dim, bad positions, bad base and offset
  m.push_back([=](Rng &r) {
    Graph g;
    Dim B = g.dim("B"), L = g.dim("L"), Do = g.dim("Do", 2 * r.uniform(0, 3) + 1),
        De = g.dim("De", 2 * ext(r)), Dd = g.dim("Dd");
    switch (r.uniform(0, 7)) {
    case 0: rope(g.input("x", DType::F32, {L, Do})); break;
    case 1: rope(g.input("x", DType::F32, {L, Dd})); break;
    case 2: rope(g.input("x", DType::F32, {De})); break;
    case 3:
      rope(g.input("x", DType::F32, {B, L, De}), g.input("p", DType::F32, {L}));
      break;
    case 4:
      rope(g.input("x", DType::F32, {B, L, De}), g.input("p", DType::I32, {L, B}));
      break;
    case 5: rope(g.input("x", DType::F32, {L, De}), RopeOptions{-1.0, false, 0}); break;
    case 6: sinusoidal_pe(g.input("x", DType::F32, {De})); break;
    default: sinusoidal_pe(g.input("x", DType::F32, {L, De}), 10000, -3); break;
    }
    return std::string("rope / sinusoidal_pe misuse");
  });
  // linear, embedding, linformer
  m.push_back([=](Rng &r) {
    Graph g;
    Dim L = g.dim("L"), D = g.dim("D", ext(r)), N = g.dim("N", ext(r)), E = g.dim("E");
    Value x = g.input("x", DType::F32, {L, D});
    switch (r.uniform(0, 6)) {
    case 0: linear(x, g.param("w", DType::F32, {E, N})); break;
    case 1: linear(x, g.param("w", DType::F32, {D})); break;
    case 2: linear(x, g.param("w", DType::F32, {D, N}), g.param("b", DType::F32, {D, N})); break;
    case 3: embedding(x, g.param("t", DType::F32, {E, D})); break;
    case 4: embedding(g.input("i", DType::I32, {L}), g.param("t", DType::F32, {D})); break;
    case 5: linformer_project(x, g.param("e", DType::F32, {N, E})); break;
    default: linformer_project(x, g.param("e", DType::F32, {N, L, D})); break;
    }
    return std::string("linear / embedding / linformer misuse");
  });
  // leaves: a dim declared twice with other extents, duplicate names, constants
  m.push_back([=](Rng &r) {
    Graph g;
    switch (r.uniform(0, 4)) {
    case 0: {
      g.dim("D", 3);
      g.dim("D", 4);
      break;
    }
    case 1: {
      Dim L = g.dim("L");
      g.input("x", DType::F32, {L});
      g.param("x", DType::F32, {L});
      break;
    }
    case 2: g.constant("c", {g.dim("L")}, {1.0, 2.0}); break;
    case 3: g.constant("c", {g.dim("N", 3)}, {1.0, 2.0}); break;
    default: {
      Dim L = g.dim("L");
      Value x = g.input("x", DType::F32, {L});
      g.output("o", x);
      g.output("o", x);
      break;
    }
    }
    return std::string("leaf / output misuse");
  });
  // values of two graphs mixed; an empty Value
  m.push_back([=](Rng &r) {
    Graph g1, g2;
    Dim L = g1.dim("L"), L2 = g2.dim("L");
    Value a = g1.input("a", DType::F32, {L}), b = g2.input("b", DType::F32, {L2});
    if (r.chance(0.5))
      add(a, b);
    else
      gelu(Value());
    return std::string("graphs mixed / empty value");
  });
  // cache views
  m.push_back([=](Rng &r) {
    Graph g;
    Dim B = g.dim("B"), H = g.dim("H", 2), C = g.dim("C"), n = g.dim("n"),
        Dh = g.dim("Dh", ext(r));
    Value past = g.input("past", DType::F32, {B, H, C, Dh});
    Value fresh = g.input("fresh", DType::F32, {B, H, n, Dh});
    switch (r.uniform(0, 2)) {
    case 0: cache_view(past, g.input("len", DType::F32, {B}), fresh); break;
    case 1: cache_view(past, g.input("len", DType::I32, {B}), g.input("f", DType::F32, {H, n, Dh})); break;
    default: cache_view(past, g.input("len", DType::I32, {B, B}), fresh); break;
    }
    return std::string("cache_view misuse");
  });
  // scalar attributes out of range: softcap's cap 0, negative, infinite or NaN; elu's alpha
  // infinite or NaN
  m.push_back([=](Rng &r) {
    Graph g;
    Value x = g.input("x", DType::F32, {g.dim("L"), g.dim("D", ext(r))});
    double bad = r.pick(std::vector<double>{0.0, -2.0, INFINITY, -INFINITY, std::nan("")});
    if (r.chance(0.5) || bad == 0.0 || bad == -2.0)
      softcap(x, bad);
    else
      elu(x, bad);
    return std::string("scalar attribute out of range");
  });
  return m;
}

std::string graph_text(const Fuzzed &f) {
  std::ostringstream os;
  os << f.g->str();
  os << "builder calls:";
  for (const std::string &s : f.log)
    os << " " << s << ";";
  os << "\nschedule: vector_bits=" << f.options.schedule.vector_bits
     << " threads=" << f.options.schedule.threads
     << " recognize_attention=" << f.options.recognize_attention
     << " checked=" << (f.options.checked ? (*f.options.checked ? "1" : "0") : "default");
  os << "\nruns:";
  for (const DimBindings &b : f.shapes) {
    os << " {";
    for (const auto &[n, e] : b)
      os << " " << n << "=" << e;
    os << " }";
  }
  os << "\n";
  return os.str();
}

int main_impl(int argc, char **argv) {
  std::uint64_t seed = 1;
  long count = 100, invalid = 1000;
  bool verbose = false;
  std::optional<DType> only;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "qkv-fuzz-graphs: " << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--seed")
      seed = std::stoull(next());
    else if (a == "--count")
      count = std::stol(next());
    else if (a == "--invalid")
      invalid = std::stol(next());
    else if (a == "--verbose")
      verbose = true;
    else if (a == "--dtype") {
      std::string d = next();
      if (d != "f32" && d != "f64" && d != "bf16" && d != "f16") {
        std::cerr << "qkv-fuzz-graphs: --dtype takes f32, f64, bf16 or f16, got '" << d << "'\n";
        return 2;
      }
      only = parse_dtype(d);
    } else {
      std::cerr << "usage: qkv-fuzz-graphs [--seed N] [--count GRAPHS] [--invalid CALLS] "
                   "[--dtype f32|f64|bf16|f16] [--verbose]\n";
      return 2;
    }
  }
  const std::string also = only ? " --dtype " + std::string(dtype_name(*only)) : "";
  auto t0 = std::chrono::steady_clock::now();
  int failures = 0;
  long ops = 0;
  for (long i = 0; i < count; ++i) {
    std::uint64_t s = seed + static_cast<std::uint64_t>(i);
    Fuzzed f;
    try {
      f = Generator(s, only).build(s);
    } catch (const std::exception &e) {
      ++failures;
      std::cout << "FAIL graph seed " << s << ": the generator made an invalid call: " << e.what()
                << "\n  reproduce: qkv-fuzz-graphs --seed " << s << " --count 1 --invalid 0" << also
                << "\n";
      continue;
    }
    ops += static_cast<long>(f.log.size());
    if (verbose)
      std::cout << "graph seed " << s << ":\n" << graph_text(f) << std::flush;
    std::string err;
    try {
      err = check_graph(f, s);
    } catch (const Failure &e) {
      err = e.what;
    } catch (const std::exception &e) {
      err = std::string("exception: ") + e.what();
    }
    if (!err.empty()) {
      ++failures;
      std::cout << "FAIL graph seed " << s << ": " << err << "\n"
                << graph_text(f) << "  reproduce: qkv-fuzz-graphs --seed " << s
                << " --count 1 --invalid 0" << also << "\n";
    }
  }
  auto t1 = std::chrono::steady_clock::now();
  std::vector<Misuse> ms = misuses();
  int bad_calls = 0;
  for (long i = 0; i < invalid; ++i) {
    std::uint64_t s = seed + static_cast<std::uint64_t>(i);
    Rng r(s * 0x9E3779B97F4A7C15ULL + 17);
    std::size_t which = static_cast<std::size_t>(r.uniform(0, static_cast<int>(ms.size()) - 1));
    std::string what = "?";
    std::string err;
    try {
      what = ms[which](r);
      err = "succeeded";
    } catch (const Error &e) {
      if (verbose)
        std::cout << "invalid call seed " << s << " (kind " << which << "): " << e.what() << "\n";
    } catch (const std::exception &e) {
      err = std::string("threw a non-qkv::Error: ") + e.what();
    }
    if (!err.empty()) {
      ++bad_calls;
      std::cout << "FAIL invalid call seed " << s << " (kind " << which << ", " << what
                << "): " << err << "\n";
    }
  }
  auto t2 = std::chrono::steady_clock::now();
  auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  std::cout << "qkv-fuzz-graphs: seed " << seed << ": " << count << " graphs (" << ops
            << " builder calls) in " << secs(t0, t1) << " s, " << failures << " failed; "
            << invalid << " invalid calls in " << secs(t1, t2) << " s, " << bad_calls
            << " did not throw qkv::Error\n";
  return failures + bad_calls == 0 ? 0 : 1;
}

} // namespace
} // namespace qkv::fuzz

int main(int argc, char **argv) { return qkv::fuzz::main_impl(argc, argv); }
