// Differential testing: compile a graph once (its dynamic dims stay dynamic), run it on
// several shapes of random inputs, and compare every output with the interpreter.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <qkv/compiler/compile.hpp>
#include <qkv/runtime/interpreter.hpp>

namespace qkv::test {

struct DiffCase {
  std::string name;
  std::function<Graph()> build;
  std::vector<DimBindings> shapes; // extents of the dynamic dims, one run each
  // f32 kernels against a double-precision oracle: errors grow with the length of the
  // reductions (sums over D, S) and with the magnitude of the values; random inputs are
  // in [-1, 1), so 1e-4 absolute plus 1e-3 relative covers reductions of a few hundred.
  double atol = 1e-4;
  double rtol = 1e-3;
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
                           std::vector<DimBindings> shapes, double atol = 1e-4,
                           double rtol = 1e-3) {
  return DiffCase{name,
                  [name, body] {
                    Graph g(name);
                    g.output("out", body(g));
                    return g;
                  },
                  std::move(shapes), atol, rtol};
}

/// Compiles c.build() and checks every shape; inputs may be adjusted by `prepare`.
inline void run_differential(const DiffCase &c,
                             const std::function<void(TensorMap &)> &prepare = nullptr) {
  Graph g = c.build();
  Kernel k = compile(g);
  for (std::size_t i = 0; i < c.shapes.size(); ++i) {
    SCOPED_TRACE(c.name + " [" + shape_name(c.shapes[i]) + "]");
    TensorMap in = random_inputs(g, c.shapes[i], 1000 + i);
    if (prepare)
      prepare(in);
    TensorMap got = k.run(in);
    TensorMap want = reference::run(g, in);
    ASSERT_EQ(got.size(), want.size());
    for (const auto &[name, t] : want) {
      Comparison cmp = compare(got.at(name), t, c.atol, c.rtol);
      EXPECT_TRUE(cmp.ok) << "output '" << name << "': " << cmp.message;
    }
  }
}

} // namespace qkv::test
