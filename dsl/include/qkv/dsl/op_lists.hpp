// The op table's lists of elementwise ops: one line per op, from which its OpKind, its
// row in the op table, its builders, its generated ODS op and (for the binary ops) that
// op's verifier are all made (docs/architecture.md, "The op table"). Only macros: the
// dialect and the ODS generator include this without the DSL's declarations.
#pragma once

/// The elementwise activations of one float tensor that take no attribute, one line each:
/// X(OpKind, builder, bound, summary), where |f(x)| <= |x| + bound (the reference
/// checker's error bound uses it). Each line makes the op's OpKind, its row in the op
/// table, its builder `Value builder(Value x)`, its typed form (typed.hpp) and its
/// `qkv.builder` op in MLIR (the ODS is generated from this list; the summary is the
/// op's). Its meaning in the interpreter and its lowering are written where every op's
/// are (docs/architecture.md, "The op table").
#define QKV_PLAIN_ACTIVATIONS(X)                                                               \
  X(Silu, silu, 0, "x * sigmoid(x)")                                                           \
  X(Softplus, softplus, 1, "log(1 + exp(x)), without overflow; log 2 at 0")                    \
  X(Sigmoid, sigmoid, 1, "1 / (1 + exp(-x)): gates (gated attention, GLU variants)")           \
  X(Relu, relu, 0, "max(x, 0); NaN stays NaN")

/// The elementwise activations of one float tensor with one scalar attribute, one line
/// each: X(OpKind, builder, attribute, default, range, error bound, summary). `attribute`
/// names the builder's parameter and the MLIR op's f64 attribute (Graph::str prints it by
/// that name); the value is kept in Attrs::alpha, the field of this list's scalar. `default`
/// is the parameter's default value, or empty where the caller must give one. `range` a
/// ScalarRange (<qkv/dsl/op_table.hpp>): the values the op table's row (so the builders and
/// the dialect's verifier) accepts. The bound an ErrorBound kind. Each line makes the op's
/// OpKind, its row, its builder `Value builder(Value x, double attribute = default)`, its
/// typed form and its `qkv.builder` op in MLIR (generated ODS, `qkv.builder %x attribute
/// 1.0 : ...`). Its meaning in the interpreter and its lowering are written where every
/// op's are.
#define QKV_SCALAR_ACTIVATIONS(X)                                                                  \
  X(Elu, elu, alpha, 1.0, Finite, LargestOperand, "x > 0 ? x : alpha (exp(x) - 1)")                \
  X(Softcap, softcap, cap, , Positive, LargestOperand,                                             \
    "cap * tanh(x / cap): soft-capping of logits (Gemma 2), |result| <= cap")

/// `= value` for a parameter's default in a list line, nothing where the line gives none.
#define QKV_DEFAULT_ARG(...) __VA_OPT__(= __VA_ARGS__)

/// The elementwise ops of two float tensors of one dtype where the shorter operand's dims
/// end the longer's (a broadcast), one line each: X(OpKind, builder, error bound, summary),
/// the bound an ErrorBound kind (<qkv/dsl/op_table.hpp>). Each line makes the op's OpKind,
/// its row in the op table, its builder `Value builder(Value a, Value b)`, its typed form
/// (typed.hpp), its `qkv.builder` op in MLIR (generated ODS) and that op's verifier. Its
/// meaning in the interpreter and its lowering are written where every op's are.
#define QKV_BROADCAST_BINARY(X)                                                                \
  X(Add, add, LargestOperand, "a + b; the shorter operand's dims end the longer's")           \
  X(Sub, sub, LargestOperand, "elementwise a - b (broadcast as add)")                          \
  X(Mul, mul, Exact, "elementwise a * b (broadcast as add)")                                   \
  X(Div, div, Exact, "elementwise a / b (broadcast as add)")

/// The other ops of two float tensors without attributes, one line each:
/// X(OpKind, builder, first, second, rule, error bound, summary), `first` and `second` the
/// builder's parameter names, `rule` the function of <qkv/dsl/shape_rules.hpp> that checks
/// the operands and gives the result (qkv::shape::rule, written there once), the bound an
/// ErrorBound kind. Each line makes the op's OpKind, its row in the op table (whose shape
/// rule evaluates `rule` and words a broken one by the rule's sentence), its builder
/// `Value builder(Value first, Value second)`, its typed form (typed.hpp, which evaluates
/// `rule` at compile time) and its `qkv.builder` op in MLIR (generated ODS, verified by the
/// row). Its meaning in the interpreter and its lowering are written where every op's are.
#define QKV_TENSOR_PAIR_OPS(X)                                                                     \
  X(Swiglu, swiglu, gate, up, same_two, LargestOperand, "silu(gate) * up")                         \
  X(Geglu, geglu, gate, up, same_two, LargestOperand,                                              \
    "gelu(gate) * up, the exact (erf) GELU: GeGLU's gated FFN")                                    \
  X(LinformerProject, linformer_project, x, e, linformer, SequenceContraction,                     \
    "x (..., S, D), e (K', S) -> e . x (..., K', D)")                                              \
  X(MergeLse, merge_lse, la, lb, same_two, LseMerge,                                               \
    "log(e^la + e^lb): the log-sum-exp of two merged partial attentions")
