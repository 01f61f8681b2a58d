// The op table: each op's facts written once, and every consumer reads them here.
//
// One row per OpKind (dsl/lib/op_table.cpp, in the enum's order, checked at compile time)
// gives the op's name, how many inputs it takes and which of them are operands rather than
// tensors captured by mods, the attributes Graph::str prints, the attributes of the
// qkv.<name> op in MLIR and the fields they come from, whether it only moves its operands'
// elements, what it adds to the reference checker's error bound, and its shape rule: a
// function that evaluates the op's constexpr rule of <qkv/dsl/shape_rules.hpp> (which the
// typed layer evaluates at compile time) over the graph's nodes and words a broken one
// with the user's tensors. op_name, parse_op_name, infer_type, Node::num_operands, the
// graph printer and the import to MLIR (for all but the seven ops with regions, unwidened
// or optional operands, or a second result) derive from the table, and the dialect's
// verifier calls the rows' shape rules (infer_unnamed, below); a test compares the table
// with the MLIR dialect's ops and their attributes, so the two cannot drift apart.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include <qkv/dsl/infer.hpp>

namespace qkv {

/// The fields of Attrs, in visit_fields' order.
enum class AttrField : std::uint8_t {
  Axes, Dims, Scale, Eps, Base, Offset, Interleaved, Approximate, Alpha, FeatureMap,
  Mask, Score, Data, HasGamma, HasBeta, HasBias,
};
inline constexpr int kNumAttrFields = static_cast<int>(AttrField::HasBias) + 1;

/// Calls f(name, field) for the one field of `a` (an Attrs, const or not) that `which`
/// names: the printer, import and the dialect's verifier reach a row's fields this way.
template <class A, class F> void visit_field(A &a, AttrField which, F &&f) {
  int i = 0;
  visit_fields(a, [&](const char *name, auto &v) {
    if (i++ == static_cast<int>(which))
      f(name, v);
  });
}

/// How the printer writes a field: by its type (Value), only the first element of a list
/// (an axis kept in `axes`), or a bool as `tanh`/`none` (gelu's approximation).
enum class AttrStyle : std::uint8_t { Value, First, TanhOrNone };

/// An attribute as Graph::str prints it: `label = value`, skipped when the field holds
/// nothing (an empty list, no scale, no mask). An empty label ends an op's list.
struct AttrUse {
  AttrField field = AttrField::Axes;
  std::string_view label;
  AttrStyle style = AttrStyle::Value;
};

/// An attribute of qkv.<name> in MLIR, made from a field of Attrs by the field's type:
/// a double an f64 (an absent optional none), an integer an i64, a bool a unit attribute
/// (absent when false), a feature map its name, a list of axes its `index`th axis
/// (made non-negative), a list of dims the static extent of its `index`th.
struct IrAttr {
  std::string_view name;
  AttrField field = AttrField::Axes;
  std::uint8_t index = 0;
};

/// The output type of an op from its inputs and attributes; throws qkv::Error naming the
/// tensors and dims. Null for leaves (input, param, constant), which have no inputs.
using ShapeRule = InferredType (*)(const Graph &g, OpKind op, const std::vector<NodeId> &inputs,
                                   const Attrs &attrs);

inline constexpr int kAnyNumber = -1;

/// How an op adds to the reference checker's error bound (runtime/lib/check_reference.cpp,
/// docs/compiler.md "Tests"): n, the length of the reductions it does, and M, the
/// magnitude of the terms it adds (or of the arguments of its exp, sin and cos). An op
/// picks the kind whose rule fits it; only a new kind is written in the checker.
enum class ErrorBound : std::uint8_t {
  Exact,               // nothing: a leaf, an op that moves elements, or one rounding relative
                       // to the value (scale, mul, div), which the rule's rtol takes
  LargestOperand,      // M = its operands' largest |x| (add, sub, gelu, swiglu)
  OperandPlus,         // M = |x| + c, the row's constant, where |f(x)| <= |x| + c (silu: 0)
  LargestResult,       // M = its result's largest |x| (a score_mod, a log-sum-exp)
  Contraction,         // n = operand 0's last extent, M = |a| |b| (and |bias|): matmul, linear
  SequenceContraction, // n = operand 0's second-to-last extent, M = |a| |b|
  AxisSoftmax,         // n = the extent of its axis (axes[0]), M = |x|
  CenteredNorm,        // n = 2 x the last extent, M = |result| or max |x| / sd (layer_norm)
  Norm,                // n = 2 x the last extent, M = |result| (rms_norm)
  Positions,           // M = the largest angle: positions (operand 1's, else the sequence's
                       // extent past the offset) or |x|
  Attention,           // n = Dh + Lk, M = the largest score, |q| |k| or |v|
  LinearAttention,     // n = Dh + Lk, M = |q| + 1, |k| + 1 or |v| (the feature map's)
  LseMerge,            // n = 2 (two weights and their sum), M = its operands' largest |x|
};

/// The values a scalar attribute of QKV_SCALAR_ACTIVATIONS may take: any finite number,
/// or a finite one above 0. The op's row refuses others, naming the tensor and the value.
enum class ScalarRange : std::uint8_t { Finite, Positive };

struct ErrorRule {
  ErrorBound kind = ErrorBound::Exact;
  double c = 0; // OperandPlus's constant
};

struct OpInfo {
  OpKind kind;
  std::string_view name;        // the DSL's builder, Graph::str, qkv.<name> in MLIR
  int min_inputs = 0;           // inputs the node takes
  int max_inputs = 0;           // kAnyNumber: no upper bound
  int operands = kAnyNumber;    // leading inputs that are operands, the rest captured by
                                // mods; kAnyNumber: every input is an operand
  std::array<AttrUse, 3> attrs{};             // printed, in order
  std::array<IrAttr, 3> ir_attrs{}; // qkv.<name>'s attributes in MLIR; empty name ends
  bool moves_elements = false;  // its result is its operands' elements, moved
  ErrorRule bound{};            // what it adds to the reference checker's error bound
  ShapeRule shape = nullptr;
};

/// Every op, indexed by OpKind.
std::span<const OpInfo> op_table();
const OpInfo &op_info(OpKind op);

/// A tensor's type as the MLIR dialect has it: a dtype and extents, kDynamic for `?`, and
/// no dim names.
struct UnnamedType {
  DType dtype = DType::F32;
  std::vector<std::int64_t> extents;
};

/// The op's shape rule applied to operands of these types (the dialect's verifier calls
/// it, so that each rule is written once): a static dim is known by its extent alone, a
/// dynamic one is unknown (unknown_dim(): the rules take it as equal to any dim). Returns
/// the result's type, kDynamic where the rule cannot tell; throws qkv::Error with the
/// rule's message, which calls operand i 'operand i'.
UnnamedType infer_unnamed(OpKind op, const std::vector<UnnamedType> &operands, const Attrs &attrs);

/// Whether the op is a graph's leaf (input, param, constant): no inputs, no shape rule.
inline bool is_leaf(OpKind op) {
  return op == OpKind::Input || op == OpKind::Param || op == OpKind::Constant;
}

} // namespace qkv
