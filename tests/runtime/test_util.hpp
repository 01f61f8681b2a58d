// Helpers shared by the runtime tests: run a graph with one output, compare against
// hand-computed values, check an error's message.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <qkv/dsl/graph.hpp>
#include <qkv/runtime/interpreter.hpp>
#include <qkv/runtime/tensor.hpp>

namespace qkv::test {

/// Runs g with the reference interpreter and returns its one output.
inline Tensor run1(const Graph &g, const TensorMap &inputs) {
  TensorMap out = reference::run(g, inputs);
  EXPECT_EQ(out.size(), 1u);
  return out.empty() ? Tensor() : out.begin()->second;
}

/// Expects an f64 tensor of this shape holding these values (row-major) to within `tol`;
/// infinities must match exactly.
inline void expect_values(const Tensor &got, const Shape &shape, const std::vector<double> &want,
                          double tol = 1e-12) {
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got.dtype(), DType::F64);
  ASSERT_EQ(got.shape(), shape);
  ASSERT_EQ(static_cast<std::size_t>(got.numel()), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    double g = got.get(static_cast<std::int64_t>(i));
    if (std::isinf(want[i]))
      EXPECT_EQ(g, want[i]) << "at flat index " << i;
    else
      EXPECT_NEAR(g, want[i], tol) << "at flat index " << i;
  }
}

/// Expects f() to throw qkv::Error whose message contains every fragment.
template <class F> void expect_error(F &&f, const std::vector<std::string> &fragments) {
  try {
    f();
  } catch (const Error &e) {
    std::string msg = e.what();
    for (const std::string &frag : fragments)
      EXPECT_NE(msg.find(frag), std::string::npos)
          << "message lacks \"" << frag << "\":\n  " << msg;
    return;
  } catch (const std::exception &e) {
    ADD_FAILURE() << "threw something other than qkv::Error: " << e.what();
    return;
  }
  ADD_FAILURE() << "did not throw qkv::Error";
}

} // namespace qkv::test
