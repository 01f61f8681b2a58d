// Differential testing: compile a graph once (its dynamic dims stay dynamic), run it on
// several shapes of random inputs, and compare every output with the interpreter.
//
// Each run: the interpreter runs first, on its own deep copy of the inputs; its outputs
// must be finite and not all zero (unless the case says otherwise), or the comparison
// would prove little; then the kernel runs, and afterwards its inputs must be unchanged,
// bit for bit. Outputs are compared under the tolerance rule below.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <qkv/compiler/compile.hpp>
#include <qkv/runtime/check_reference.hpp>
#include <qkv/runtime/interpreter.hpp>

namespace qkv::test {

// ---- the tolerance rule (docs/compiler.md, "Tests") ------------------------------------------
//
// An output element passes when
//
//   |got - want| <= C * eps(dtype) * n * (M + |want|)
//
// eps: the dtype's machine epsilon (2^-23 for f32, 2^-52 for f64);
// n:   1 + the sum of the lengths of the reductions one output element goes through
//      (a dot product over Dh then a softmax-weighted sum over S: n = 1 + Dh + S);
// M:   the magnitude of the terms those reductions sum, and of the arguments of exp, sin
//      and cos (1 for inputs in [-1, 1); the score magnitude for large scores);
// C:   kTolC, one constant for the whole suite.
//
// A sum of n terms computed in any order, with any blocking, has an error below
// n * eps * sum|terms| (a few ulp more with a polynomial exp), and random rounding makes
// the real error far smaller: C = 8 leaves the current kernels at about a tenth of the
// tolerance (QKV_TOL_REPORT=1 prints worst error / allowed) and still fails a dropped
// epsilon, scale or max subtraction.
//
// For f16/bf16 outputs that rule is loose (bf16's eps is 2^-7: over n = Dh + S terms it
// exceeds the outputs themselves). A case whose half-precision output is one node over
// exact half inputs (attention alone) can take the tighter half_ulps(K) rule instead:
//
//   |got - want| <= C * eps(f32) * n * (M + |want|) + K * eps(dtype) * max|want|
//
// the kernels compute in f32 and round once, as the interpreter rounds its double result
// once (at most an ulp apart), and the tensor-core kernel's P rounding adds at most
// 2^-9 * max|v| in bf16 (docs/gpu.md).
//
// The rule itself is the library's (qkv/runtime/check_reference.hpp), which
// check_against_reference applies for users.
inline constexpr double kTolC = kToleranceC;

inline double machine_eps(DType d) { return machine_epsilon(d); }

inline Tolerance tolerance(DType dtype, double n, double magnitude) {
  return tolerance_rule(dtype, n, magnitude);
}

struct DiffCase {
  std::string name;
  std::function<Graph()> build;
  std::vector<DimBindings> shapes; // extents of the dynamic dims, one run each
  // The dims whose extents add up to n (see the rule above); a static dim counts too.
  std::vector<std::string> reduce;
  double magnitude = 1; // M for the unit input set (random inputs in [-1, 1))
  // The large-magnitude input set: when `large` > 0 every shape runs again with the float
  // inputs named in `large_names` (all float inputs, not params, when empty) multiplied by
  // `large`, under M = `large_magnitude`.
  double large = 0;
  double large_magnitude = 0;
  std::vector<std::string> large_names;
  // Adjusts the random inputs of every run (before the large set's scaling).
  std::function<void(TensorMap &)> prepare;
  double half_ulps = 0;     // > 0: the half_ulps rule above for f16/bf16 outputs
  bool zero_ok = false;     // the reference may be all zeros (x - x, fully masked rows)
  bool infinite_ok = false; // the reference may hold +-inf (masked scores); NaN never

  DiffCase &sums(std::vector<std::string> dims, double m = 1) {
    reduce = std::move(dims);
    magnitude = m;
    return *this;
  }
  DiffCase &large_inputs(double factor, double m, std::vector<std::string> names = {}) {
    large = factor;
    large_magnitude = m;
    large_names = std::move(names);
    return *this;
  }
  DiffCase &inputs(std::function<void(TensorMap &)> f) {
    prepare = std::move(f);
    return *this;
  }
  DiffCase &within_half_ulps(double k) {
    half_ulps = k;
    return *this;
  }
  DiffCase &may_be_zero() {
    zero_ok = true;
    return *this;
  }
  DiffCase &may_be_infinite() {
    infinite_ok = true;
    return *this;
  }
};

inline std::ostream &operator<<(std::ostream &os, const DiffCase &c) { return os << c.name; }

inline std::string shape_name(const DimBindings &b) {
  std::string s;
  for (const auto &[k, v] : b)
    s += (s.empty() ? "" : ",") + k + "=" + std::to_string(v);
  return s.empty() ? "static" : s;
}

/// A case whose graph has one output, "out", built by `body`.
inline DiffCase one_output(std::string name, std::function<Value(Graph &)> body,
                           std::vector<DimBindings> shapes) {
  DiffCase c;
  c.name = name;
  c.build = [name, body] {
    Graph g(name);
    g.output("out", body(g));
    return g;
  };
  c.shapes = std::move(shapes);
  return c;
}

inline TensorMap deep_copy(const TensorMap &m) {
  TensorMap out;
  for (const auto &[name, t] : m)
    out.emplace(name, t.clone());
  return out;
}

inline bool same_bits(const Tensor &a, const Tensor &b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

/// A DiffCase::prepare that multiplies input `name` by `factor` (say, to make a variance
/// small enough that a norm's epsilon matters).
inline std::function<void(TensorMap &)> times(std::string name, double factor) {
  return [name, factor](TensorMap &in) {
    Tensor &t = in.at(name);
    for (std::int64_t i = 0; i < t.numel(); ++i)
      t.set(i, t.get(i) * factor);
  };
}

/// Multiplies the float inputs of g named in `names` (all float inputs, not params, when
/// empty) by `factor`.
inline void scale_inputs(const Graph &g, TensorMap &in, double factor,
                         const std::vector<std::string> &names) {
  for (const std::string &name : names)
    if (!g.find_argument(name))
      ADD_FAILURE() << "large_inputs names '" << name << "', not an input of the graph";
  for (NodeId id : g.arguments()) {
    const Node &n = g.node(id);
    bool named = std::find(names.begin(), names.end(), n.name) != names.end();
    if (!is_float(n.dtype) || (names.empty() ? n.op != OpKind::Input : !named))
      continue;
    Tensor &t = in.at(n.name);
    for (std::int64_t i = 0; i < t.numel(); ++i)
      t.set(i, t.get(i) * factor);
  }
}

/// The worst |got - want| / allowed over the elements (for QKV_TOL_REPORT).
inline double worst_ratio(const Tensor &got, const Tensor &want, Tolerance t) {
  double worst = 0;
  for (std::int64_t i = 0; i < got.numel() && i < want.numel(); ++i) {
    double g = got.get(i), w = want.get(i);
    if (std::isfinite(g) && std::isfinite(w))
      worst = std::max(worst, std::fabs(g - w) / (t.atol + t.rtol * std::fabs(w)));
  }
  return worst;
}

/// One run of kernel k on `in` against the interpreter, under case c's rules, with M =
/// `magnitude`. Failures are gtest failures naming the output or input.
inline void check_run(const Kernel &k, const DiffCase &c, const TensorMap &in, double magnitude) {
  const Graph &g = k.graph();
  TensorMap saved = deep_copy(in);
  TensorMap want = reference::run(g, deep_copy(in));
  for (const auto &[name, t] : want) {
    bool nonzero = t.numel() == 0 || c.zero_ok;
    for (std::int64_t i = 0; i < t.numel(); ++i) {
      double w = t.get(i);
      if (std::isnan(w) || (std::isinf(w) && !c.infinite_ok)) {
        ADD_FAILURE() << "the reference output '" << name << "' is " << w << " at flat index " << i
                      << ": the case checks nothing there";
        nonzero = true; // one complaint is enough
        break;
      }
      nonzero = nonzero || w != 0;
    }
    EXPECT_TRUE(nonzero) << "the reference output '" << name
                         << "' is all zeros: a kernel writing nothing would pass";
  }

  TensorMap got = k.run(in);
  for (const auto &[name, t] : saved)
    EXPECT_TRUE(same_bits(in.at(name), t)) << "the kernel changed its input '" << name << "'";

  DimBindings dims = bind_dims(g, signature(in));
  double n = 1;
  for (const std::string &d : c.reduce) {
    auto it = dims.find(d);
    if (it == dims.end()) {
      ADD_FAILURE() << "reduction dim '" << d << "' is not a dim of the graph";
      continue;
    }
    n += static_cast<double>(it->second);
  }
  ASSERT_EQ(got.size(), want.size());
  for (const auto &[name, w] : want) {
    // The interpreter's outputs are f64: the kernel's say whether the output is half.
    Tolerance tol = tolerance(got.at(name).dtype(), n, magnitude);
    if (c.half_ulps > 0 && is_half(got.at(name).dtype())) {
      double top = 0;
      for (std::int64_t i = 0; i < w.numel(); ++i)
        top = std::max(top, std::fabs(w.get(i)));
      Tolerance f32 = tolerance(DType::F32, n, magnitude);
      tol = {f32.atol + c.half_ulps * machine_eps(got.at(name).dtype()) * top, f32.rtol};
    }
    Comparison cmp = compare(got.at(name), w, tol.atol, tol.rtol);
    EXPECT_TRUE(cmp.ok) << "output '" << name << "' (n = " << n << ", M = " << magnitude
                        << "): " << cmp.message;
    if (std::getenv("QKV_TOL_REPORT"))
      std::cout << "tol-report " << c.name << " " << name << " n=" << n << " M=" << magnitude
                << " worst/allowed=" << worst_ratio(got.at(name), w, tol) << "\n";
  }
}

/// Runs every shape of c on kernel k: the unit input set, then the large one if any.
inline void check_kernel(const Kernel &k, const DiffCase &c) {
  const Graph &g = k.graph();
  struct Set {
    const char *name;
    double factor, magnitude;
  };
  std::vector<Set> sets{{"unit", 1, c.magnitude}};
  if (c.large > 0)
    sets.push_back({"large", c.large, c.large_magnitude});
  for (const Set &s : sets) {
    for (std::size_t i = 0; i < c.shapes.size(); ++i) {
      SCOPED_TRACE(c.name + " [" + shape_name(c.shapes[i]) + "] inputs " + s.name);
      TensorMap in = random_inputs(g, c.shapes[i], 1000 + i);
      if (c.prepare)
        c.prepare(in);
      if (s.factor != 1)
        scale_inputs(g, in, s.factor, c.large_names);
      check_run(k, c, in, s.magnitude);
    }
  }
}

/// Compiles c.build() and checks every shape.
inline void run_differential(const DiffCase &c) { check_kernel(compile(c.build()), c); }

} // namespace qkv::test
