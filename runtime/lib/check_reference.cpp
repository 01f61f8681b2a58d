// check_against_reference: the tolerance rule of the test suite (docs/compiler.md,
// "Tests"), with n and M worked out from the graph and the interpreter's values.
#include <qkv/runtime/check_reference.hpp>

#include <algorithm>
#include <cmath>
#include <sstream>

#include <qkv/dsl/op_table.hpp>
#include <qkv/runtime/interpreter.hpp>

#include "bounds_messages.hpp"

namespace qkv {

double machine_epsilon(DType d) {
  switch (d) {
  case DType::F64: return 0x1p-52;
  case DType::F32: return 0x1p-23;
  case DType::F16: return 0x1p-10;
  case DType::BF16: return 0x1p-7;
  default: return 0; // integer outputs must match exactly
  }
}

Tolerance tolerance_rule(DType dtype, double n, double magnitude) {
  double r = kToleranceC * machine_epsilon(dtype) * n;
  return {r * magnitude, r};
}

const ReferenceCheck &ReferenceCheck::require() const {
  if (!ok)
    user_error("the compiled kernel disagrees with the interpreter:\n" + message);
  return *this;
}

namespace {

/// The largest finite |x| of a tensor (masked scores are -inf; they add nothing).
double max_abs(const Tensor &t) {
  double m = 0;
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    double x = t.get(i);
    if (std::isfinite(x))
      m = std::max(m, std::fabs(x));
  }
  return m;
}

/// Layer norm's sensitivity to its input's rounding: max over rows (the last axis) of
/// max |x| / sqrt(var + eps). x - mean carries an error of about eps * |x|, which the
/// division by the row's deviation scales: a row of two close values (sigma small)
/// amplifies it far past the output's magnitude. (RMS norm divides by sqrt(mean x^2 +
/// eps) >= max |x| / sqrt(n): no cancellation, no such term.)
double layer_norm_condition(const Tensor &x, double eps) {
  const Shape &s = x.shape();
  std::int64_t d = s.empty() ? 1 : s.back(), rows = d > 0 ? x.numel() / d : 0;
  double worst = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    double sum = 0, big = 0;
    for (std::int64_t i = 0; i < d; ++i) {
      sum += x.get(r * d + i);
      big = std::max(big, std::fabs(x.get(r * d + i)));
    }
    double mean = sum / static_cast<double>(d), var = 0;
    for (std::int64_t i = 0; i < d; ++i)
      var += (x.get(r * d + i) - mean) * (x.get(r * d + i) - mean);
    double sd = std::sqrt(var / static_cast<double>(d) + eps);
    if (std::isfinite(big) && sd > 0)
      worst = std::max(worst, big / sd);
  }
  return worst;
}

/// What one node adds to the rule: the length of the reduction it does and the magnitude
/// of the terms it adds (or of the arguments of its exp, sin and cos).
struct Bound {
  double reduce = 0, magnitude = 0;
};

/// The rule of the op's row (ErrorBound, <qkv/dsl/op_table.hpp>) applied to node n.
Bound bound_of(const Graph &g, const Node &n, const std::vector<Tensor> &vals,
               const TensorMap &inputs) {
  auto in = [&](std::size_t i) -> const Tensor & { return vals[n.inputs.at(i)]; };
  auto mag = [&](std::size_t i) { return max_abs(in(i)); };
  auto largest_operand = [&] {
    double m = 0;
    for (std::size_t i = 0; i < static_cast<std::size_t>(n.num_operands()); ++i)
      m = std::max(m, mag(i));
    return m;
  };
  auto extent = [&](std::size_t i, int from_end) {
    const Shape &s = in(i).shape();
    return static_cast<double>(s[s.size() - static_cast<std::size_t>(from_end)]);
  };
  const ErrorRule &rule = op_info(n.op).bound;
  switch (rule.kind) {
  case ErrorBound::Exact: return {};
  case ErrorBound::LargestOperand: return {0, largest_operand()};
  case ErrorBound::OperandPlus: return {0, mag(0) + rule.c};
  case ErrorBound::LargestResult: return {0, max_abs(vals[n.id])};
  case ErrorBound::Contraction:
    return {extent(0, 1), std::max(mag(0) * mag(1), n.attrs.has_bias ? mag(2) : 0.0)};
  case ErrorBound::SequenceContraction: return {extent(0, 2), mag(0) * mag(1)};
  case ErrorBound::AxisSoftmax: {
    const Shape &s = in(0).shape();
    std::int64_t axis = n.attrs.axes.at(0);
    axis = axis < 0 ? axis + static_cast<std::int64_t>(s.size()) : axis;
    return {static_cast<double>(s[static_cast<std::size_t>(axis)]), mag(0)};
  }
  case ErrorBound::CenteredNorm:
    return {2 * extent(0, 1), std::max(max_abs(vals[n.id]), layer_norm_magnitude(n, vals))};
  case ErrorBound::Norm: return {2 * extent(0, 1), max_abs(vals[n.id])};
  case ErrorBound::Positions: {
    // The angles: positions (at most the sequence's extent past the offset, or the
    // positions tensor's largest) times frequencies of at most 1.
    double pos = n.num_operands() > 1
                     ? mag(1)
                     : extent(0, 2) + static_cast<double>(std::abs(n.attrs.offset));
    return {0, std::max(pos, mag(0))};
  }
  case ErrorBound::Attention: {
    double scores = reference::max_abs_score(g, inputs, vals, n.id);
    return {extent(0, 1) + extent(1, 2), std::max({scores, mag(0) * mag(1), mag(2)})};
  }
  case ErrorBound::LinearAttention:
    return {extent(0, 1) + extent(1, 2), std::max({mag(0) + 1, mag(1) + 1, mag(2)})};
  case ErrorBound::LseMerge: return {2, largest_operand()};
  }
  internal_error("bound_of: " + std::string(op_name(n.op)) + " has no error bound kind");
}

std::string num(double v) {
  std::ostringstream os;
  os.precision(3);
  os << v;
  return os.str();
}

/// n, M and the number of nodes that compute (not only move elements) of everything
/// output node `id` depends on, each node counted once.
void sum_bounds(const Graph &graph, NodeId id, const std::vector<Bound> &bounds, OutputCheck &c,
                int &computing) {
  std::vector<bool> live(graph.nodes().size(), false);
  live[id] = true;
  computing = 0;
  for (std::size_t i = graph.nodes().size(); i-- > 0;) {
    if (!live[i])
      continue;
    const Node &n = graph.nodes()[i];
    for (NodeId x : n.inputs)
      live[x] = true;
    c.n += bounds[i].reduce;
    c.magnitude = std::max(c.magnitude, bounds[i].magnitude);
    computing += !is_leaf(n.op) && !op_info(n.op).moves_elements;
  }
}

/// |got - want| / allowed at flat index i (infinite where a non-finite value differs).
double share_of(const Tensor &got, const Tensor &want, std::int64_t i, const Tolerance &t) {
  double a = got.get(i), b = want.get(i), allowed = t.atol + t.rtol * std::fabs(b);
  if (!std::isfinite(a) || !std::isfinite(b) || allowed <= 0)
    return a == b ? 0 : INFINITY;
  return std::fabs(a - b) / allowed;
}

/// The rule applied to one output: got (the kernel's) against want (the interpreter's).
OutputCheck check_output(const std::string &name, const Tensor &got, const Tensor &want,
                         const Graph &graph, NodeId id, const std::vector<Bound> &bounds) {
  OutputCheck c;
  c.name = name;
  int computing = 0;
  sum_bounds(graph, id, bounds, c, computing);
  DType dt = got.dtype();
  Tolerance t = tolerance_rule(dt, c.n, c.magnitude);
  c.rule = is_int(dt) ? "exact" : std::string(dtype_name(dt));
  if (is_half(dt) && computing == 1) {
    // One rounding each side: the kernel computes in f32 and rounds once, the
    // interpreter in double and rounds once.
    Tolerance f32 = tolerance_rule(DType::F32, c.n, c.magnitude);
    t = {f32.atol + 2 * machine_epsilon(dt) * max_abs(want), f32.rtol};
    c.rule += " ulps";
  }
  c.atol = t.atol;
  c.rtol = t.rtol;
  c.comparison = compare(got, want, t.atol, t.rtol);
  c.ok = c.comparison.ok;
  // The worst element: compare()'s when one fails, else the one nearest the tolerance.
  std::int64_t worst = c.comparison.worst;
  for (std::int64_t i = 0; worst < 0 && i < got.numel(); ++i) {
    double share = share_of(got, want, i, t);
    if (share > c.worst_share || i == 0) {
      c.worst_share = share;
      c.worst_index = unravel_index(i, got.shape());
    }
  }
  if (worst >= 0) {
    c.worst_share = share_of(got, want, worst, t);
    c.worst_index = unravel_index(worst, got.shape());
  }
  return c;
}

std::string line_of(const OutputCheck &c, const Tensor &got) {
  std::ostringstream line;
  line << "output '" << c.name << "' " << got.type_str() << ": " << (c.ok ? "ok" : "FAIL")
       << " (rule " << c.rule << ", n = " << num(c.n) << ", M = " << num(c.magnitude)
       << ", atol " << num(c.atol) << ", rtol " << num(c.rtol) << ")";
  if (c.ok && got.numel() > 0)
    line << "; worst " << detail::shape_str(c.worst_index) << " at " << num(c.worst_share)
         << " of the tolerance, max |diff| " << num(c.comparison.max_abs_err);
  if (!c.ok)
    line << "; " << c.comparison.message;
  return line.str() + "\n";
}

} // namespace

double layer_norm_magnitude(const Node &n, const std::vector<Tensor> &vals) {
  double gamma = n.attrs.has_gamma ? max_abs(vals[n.inputs.at(1)]) : 1.0;
  return layer_norm_condition(vals[n.inputs.at(0)], n.attrs.eps) * gamma;
}

ReferenceCheck check_against_reference(const Kernel &kernel, const Graph &graph,
                                       const TensorMap &inputs) {
  std::vector<Tensor> vals = reference::run_all(graph, inputs);
  TensorMap got = kernel.run(inputs);
  std::vector<Bound> bounds;
  for (const Node &n : graph.nodes())
    bounds.push_back(bound_of(graph, n, vals, inputs));
  ReferenceCheck out;
  for (const auto &[name, id] : graph.outputs()) {
    auto it = got.find(name);
    user_check(it != got.end(), "check_against_reference: the kernel of graph '" +
                                    kernel.graph().name() + "' has no output '" + name +
                                    "' of graph '" + graph.name() + "'");
    const Tensor &want = vals[id];
    user_check(it->second.shape() == want.shape(),
               "check_against_reference: output '" + name + "' of the kernel is " +
                   it->second.type_str() + ", the interpreter's " + want.type_str());
    OutputCheck c = check_output(name, it->second, want, graph, id, bounds);
    out.message += line_of(c, it->second);
    out.ok = out.ok && c.ok;
    out.outputs.push_back(std::move(c));
  }
  return out;
}

} // namespace qkv
