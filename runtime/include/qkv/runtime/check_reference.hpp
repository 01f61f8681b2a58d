// A compiled kernel against the reference interpreter, under the tolerance rule the test
// suite uses (docs/compiler.md, "Tests"): the check a user's program makes, without
// picking an atol.
//
//   ReferenceCheck c = check_against_reference(kernel, graph, inputs);
//   std::cout << c.message;   // one line per output: n, M, the worst element and its share
//   c.require();              // a qkv::Error naming the worst element when one is off
#pragma once

#include <string>
#include <vector>

#include <qkv/dsl/graph.hpp>
#include <qkv/runtime/kernel.hpp>
#include <qkv/runtime/tensor.hpp>

namespace qkv {

/// The tolerance rule: an element passes when
///
///   |got - want| <= C * eps(dtype) * n * (M + |want|),   C = kToleranceC = 8
///
/// with eps the output dtype's machine epsilon, n 1 + the lengths of the reductions the
/// element went through, M the magnitude of the terms they add and of the arguments of
/// exp, sin and cos. As compare()'s atol + rtol * |want|: atol = C eps n M, rtol = C eps n.
inline constexpr double kToleranceC = 8;
/// 2^-52 (f64), 2^-23 (f32), 2^-10 (f16), 2^-7 (bf16); 0 for integers (exact).
double machine_epsilon(DType dtype);
struct Tolerance {
  double atol = 0, rtol = 0;
};
Tolerance tolerance_rule(DType dtype, double n, double magnitude);

/// The M the rule takes for layer norm node `n` (`vals`: every node's value, as
/// reference::run_all gives them): max |gamma| (1 without) times its input's
/// conditioning, the largest over the rows (the last axis) of max |x| / sqrt(var + eps).
/// x - mean carries an error of about eps(f32) * |x|, which the division by the row's
/// deviation scales: a row of close values (two values 1e-3 apart: about 1400) amplifies
/// it far past the output's magnitude. (An RMS norm divides by sqrt(mean x^2 + eps) >=
/// max |x| / sqrt(n): no cancellation, no such term.)
double layer_norm_magnitude(const Node &n, const std::vector<Tensor> &vals);

/// One output of check_against_reference.
struct OutputCheck {
  std::string name;
  /// n and M as the rule takes them, worked out from the graph and the interpreter's
  /// values (see check_against_reference).
  double n = 1, magnitude = 0;
  /// The tolerance: an element passes when |got - want| <= atol + rtol * |want|.
  double atol = 0, rtol = 0;
  /// Which form of the rule: "f32", "f64", "exact" (integers), "f16"/"bf16" (the rule with
  /// the half type's eps) or "f16 ulps"/"bf16 ulps" (one node over exact half-precision
  /// inputs: the f32 rule plus two units in the last place of the largest |want|).
  std::string rule;
  /// The elementwise comparison: max errors, the element that misses by the most.
  Comparison comparison;
  /// The worst |got - want| / allowed over the elements (at most 1 when ok), and where.
  double worst_share = 0;
  Shape worst_index;
  bool ok = true;
};

struct ReferenceCheck {
  std::vector<OutputCheck> outputs;
  bool ok = true;
  /// One line per output: its name, ok or FAIL, n, M, the worst element's index, values
  /// and share of the tolerance (and, failing, how many elements are off).
  std::string message;
  /// *this when ok; else throws qkv::Error with the message.
  const ReferenceCheck &require() const;
};

/// Runs `kernel` and the reference interpreter (on `graph`: the kernel's own, or another
/// graph with the same outputs) on `inputs` and compares every output under the rule,
/// with n and M from the graph and the interpreter's values: n = 1 + the reductions of
/// every node the output depends on (a matmul's or linear's K, a softmax's axis, twice a
/// norm's width, Dh + S for attention, S for Linformer's projection); M = the largest of
/// the magnitudes those nodes see (|a| |b| for a contraction's terms, the largest |score|
/// after the score_mod that the softmax keeps, |x| into exp-like ops, the largest
/// position into sin and cos, the operands of a sum or difference). A half-precision
/// output of one computing node over exact half-precision inputs (attention alone, a
/// decode step) takes the tighter ulps form. The interpreter's errors (a load out of
/// bounds) and the kernel's are thrown as they are.
ReferenceCheck check_against_reference(const Kernel &kernel, const Graph &graph,
                                       const TensorMap &inputs);

} // namespace qkv
