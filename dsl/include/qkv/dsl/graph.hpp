// The untyped graph: qkv's IR before MLIR, and its second front door.
//
// A Graph is a DAG of nodes in creation (= topological) order. Each node has an op, its
// inputs, attributes, a dtype and a list of named dims. Op builders (matmul, softmax,
// attention, ...) check the op's shape rules at run time and throw qkv::Error naming the
// tensors and dims involved. The typed front end (<qkv/dsl/typed.hpp>) checks the same
// rules at compile time and then calls these builders: there is one implementation.
//
// The meaning of every op is defined by the reference interpreter
// (<qkv/runtime/interpreter.hpp>); docs/dsl.md lists them with examples.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <qkv/dsl/dim.hpp>
#include <qkv/dsl/dtype.hpp>
#include <qkv/dsl/error.hpp>
#include <qkv/dsl/expr.hpp>
#include <qkv/dsl/op_lists.hpp>

namespace qkv {

using NodeId = std::int32_t;

// One name per op everywhere: OpKind::SplitHeads, split_heads(), "split_heads" in the
// printer, qkv.split_heads in MLIR, eval_split_heads in the interpreter.
enum class OpKind : std::uint8_t {
  Input,     // a run-time input, bound by name
  Param,     // a weight, bound by name like an input
  Constant,  // values stored in the graph
  MatMul,    // (..., M, K) x (..., K, N) -> (..., M, N); a 2-D side broadcasts
  Linear,    // x (..., K) . w (K, N) [+ bias (N)] -> (..., N)
  Transpose, // swap two axes
  Scale,     // x * constant
#define QKV_OP_KIND(kind, builder, bound, summary) kind,
  QKV_BROADCAST_BINARY(QKV_OP_KIND) // add, sub, mul, div (op_lists.hpp)
#undef QKV_OP_KIND
  Softmax,      // over one axis, max-subtracted; a row that is all -inf gives 0
  SplitHeads,   // (..., L, H*Dh) -> (..., H, L, Dh)
  MergeHeads,   // (..., H, L, Dh) -> (..., L, H*Dh)
  Concat,       // along one axis
  Mask,         // scores where mask_mod is false become -inf
  ScoreMod,     // scores -> score_mod(score, b, h, q, kv)
  SinusoidalPE, // x + PE(position, feature) over x's last two axes
  Rope,         // rotary position embedding over x's last two axes (L, Dh)
  LayerNorm,    // over the last axis, optional gamma/beta
  RmsNorm,      // over the last axis, optional gamma
  Gelu,
#define QKV_OP_KIND(kind, builder, attribute, default_value, range, bound, summary) kind,
  QKV_SCALAR_ACTIVATIONS(QKV_OP_KIND) // elu, softcap: one scalar attribute (op_lists.hpp)
#undef QKV_OP_KIND
#define QKV_OP_KIND(kind, builder, bound, summary) kind,
  QKV_PLAIN_ACTIVATIONS(QKV_OP_KIND) // and those without (op_lists.hpp)
#undef QKV_OP_KIND
#define QKV_OP_KIND(kind, builder, a, b, rule, bound, summary) kind,
  QKV_TENSOR_PAIR_OPS(QKV_OP_KIND) // swiglu, linformer_project, merge_lse (op_lists.hpp)
#undef QKV_OP_KIND
  Embedding,       // table[ids]: ids (...) integer, table (V, D) -> (..., D)
  Attention,       // softmax(score_mod(scale q.k) masked) . v, with GQA/MQA and cross
  LinearAttention, // phi(q) (phi(k)^T v), normalised
  CacheView,       // a KV cache's rows read in place, then this step's new rows
  PagedCacheView,  // the same over a paged cache: a page pool and a block table
  AttentionLse,    // an attention node's log-sum-exp per query row (partial attention)
  MergeAttention,  // two partial attentions' outputs merged exactly by their log-sum-exps
};
/// How many ops there are: the last OpKind's number + 1. Each op has a row in the op
/// table (<qkv/dsl/op_table.hpp>); a row missing or out of order fails to compile.
inline constexpr int kNumOpKinds = static_cast<int>(OpKind::MergeAttention) + 1;

std::string_view op_name(OpKind op);
/// The OpKind with this printed name, if any.
std::optional<OpKind> parse_op_name(std::string_view name);

enum class FeatureMap : std::uint8_t { EluPlusOne, Relu };
std::string_view feature_map_name(FeatureMap f);
/// The feature map with this name ("elu_plus_one", "relu"), if any.
std::optional<FeatureMap> parse_feature_map(std::string_view name);

/// Attributes. Each op uses the fields its comment in OpKind / docs/dsl.md names; the
/// rest keep their defaults (the printer and hash only look at the used ones).
struct Attrs {
  std::vector<std::int64_t> axes;  // Transpose: the two axes; Softmax, Concat: one axis
  std::vector<Dim> dims;           // SplitHeads: {heads, head_dim}; MergeHeads, Concat:
                                   // {out} when the user named the result's new dim
  std::optional<double> scale;     // Scale: the factor; Attention: nullopt = 1/sqrt(Dh)
  double eps = 0;                  // LayerNorm, RmsNorm
  double base = 10000;             // Rope, SinusoidalPE
  std::int64_t offset = 0;         // Rope, SinusoidalPE: position of the first row
  bool interleaved = false;        // Rope: rotate pairs (2i, 2i+1), else (i, i + Dh/2)
  bool approximate = false;        // Gelu: tanh approximation, else exact erf
  double alpha = 1.0;              // the scalar of QKV_SCALAR_ACTIVATIONS: elu's alpha,
                                   // softcap's cap
  FeatureMap feature_map = FeatureMap::EluPlusOne; // LinearAttention
  ExprPtr mask;                    // Mask, Attention (null: no mask)
  ExprPtr score;                   // ScoreMod, Attention (null: no score_mod)
  std::shared_ptr<const std::vector<double>> data; // Constant, row-major
  bool has_gamma = false, has_beta = false, has_bias = false; // LayerNorm/RmsNorm/Linear
};

/// Calls f(name, field) for every field of `a` (an Attrs, const or not), in declaration
/// order: the one list of them for code that must see every attribute, whatever the op
/// (the kernel cache's key, Graph::key_text). A field added to Attrs must be added here;
/// graph.cpp counts the fields and does not compile until it is.
template <class A, class F> void visit_fields(A &a, F &&f) {
  f("axes", a.axes);
  f("dims", a.dims);
  f("scale", a.scale);
  f("eps", a.eps);
  f("base", a.base);
  f("offset", a.offset);
  f("interleaved", a.interleaved);
  f("approximate", a.approximate);
  f("alpha", a.alpha);
  f("feature_map", a.feature_map);
  f("mask", a.mask);
  f("score", a.score);
  f("data", a.data);
  f("has_gamma", a.has_gamma);
  f("has_beta", a.has_beta);
  f("has_bias", a.has_bias);
}

/// Every field of `a` that differs from a default Attrs, as `name=value` separated by
/// spaces (mods printed with `names`, as Graph::str prints them): what the kernel cache
/// keys on, so no attribute can be missing from a key.
std::string attrs_key(const Attrs &a, const std::vector<std::string> *names = nullptr);

struct Node {
  NodeId id = -1;
  OpKind op = OpKind::Input;
  std::string name; // user-given (inputs, params, .named()) or "<op>#<id>"
  std::vector<NodeId> inputs;
  Attrs attrs;
  DType dtype = DType::F32;
  std::vector<Dim> dims;

  int rank() const { return static_cast<int>(dims.size()); }
  /// For Attention/Mask/ScoreMod: how many leading inputs are operands (q,k,v / scores);
  /// the rest are tensors captured by the mods.
  int num_operands() const;
};

/// How a dim's extent is known: given, or derived from other dims.
struct DimDef {
  std::string name;
  std::int64_t extent = kDynamic;
  enum class Kind : std::uint8_t { Atomic, Product, Sum } kind = Kind::Atomic;
  std::vector<std::string> parts; // Product/Sum: the dims it is made of
};

class Graph;

/// A handle to one node of a graph: what op builders take and return. It refers to the
/// Graph object it came from, which must outlive it.
class Value {
public:
  Value() = default;
  Value(Graph *g, NodeId id) : g_(g), id_(id) {}

  bool valid() const { return g_ != nullptr && id_ >= 0; }
  Graph &graph() const;
  NodeId id() const { return id_; }
  const Node &node() const;
  const std::vector<Dim> &dims() const { return node().dims; }
  DType dtype() const { return node().dtype; }
  int rank() const { return node().rank(); }
  const std::string &name() const { return node().name; }
  /// 'x' (B, L, D): how errors refer to this value.
  std::string describe() const;
  /// Names the node, for error messages and the printed graph. Returns *this.
  Value named(const std::string &name) const;

  /// Loads from this tensor inside a mod: slopes[h], bias(h, q - kv).
  Expr operator[](const Expr &i) const { return load({i}); }
  template <class... I> Expr operator()(const I &...idx) const { return load({Expr(idx)...}); }
  Expr load(std::vector<Expr> idx) const;

  friend bool operator==(const Value &a, const Value &b) { return a.g_ == b.g_ && a.id_ == b.id_; }

private:
  Graph *g_ = nullptr;
  NodeId id_ = -1;
};

class Graph {
public:
  explicit Graph(std::string name = "graph");
  Graph(const Graph &) = default;
  Graph(Graph &&) = default;
  Graph &operator=(const Graph &) = default;
  Graph &operator=(Graph &&) = default;
  // Values keep a Graph*: after copying or moving a graph, take Values from the new one
  // with value(id).

  const std::string &name() const { return name_; }

  // ---- dims ----
  /// Declares a dim (or returns the one already declared with this name). Declaring the
  /// same name with another extent is an error.
  Dim dim(const std::string &name, std::int64_t extent = kDynamic);
  const std::map<std::string, DimDef> &dim_defs() const { return dims_; }
  /// Registers the dims of a shape (atomic ones by name; derived ones with their parts).
  void use_dims(const std::vector<Dim> &dims, const std::string &context);
  void define_product(const Dim &result, const Dim &a, const Dim &b);
  void define_sum(const Dim &result, const std::vector<Dim> &parts);

  // ---- leaves ----
  Value input(const std::string &name, DType dtype, const std::vector<Dim> &dims);
  Value param(const std::string &name, DType dtype, const std::vector<Dim> &dims);
  /// Values row-major; all dims must be static.
  Value constant(const std::string &name, const std::vector<Dim> &dims,
                 std::vector<double> values, DType dtype = DType::F32);
  void output(const std::string &name, Value v);
  /// Outputs a typed value or an attention builder (anything with .value()).
  template <class T>
    requires requires(const T &t) {
      { t.value() } -> std::convertible_to<Value>;
    }
  void output(const std::string &name, const T &v) {
    output(name, Value(v.value()));
  }

  // Typed front end (defined in <qkv/dsl/typed.hpp>): g.input<f32>("x", B, L, D).
  template <class DT, class... D> auto input(const std::string &name, D... dims);
  template <class DT, class... D> auto param(const std::string &name, D... dims);

  // ---- inspection ----
  const std::vector<Node> &nodes() const { return nodes_; }
  const Node &node(NodeId id) const;
  Node &mutable_node(NodeId id);
  Value value(NodeId id) { return Value(this, id); }
  const std::vector<std::pair<std::string, NodeId>> &outputs() const { return outputs_; }
  /// Inputs and params, in creation order: the arguments of a compiled kernel.
  std::vector<NodeId> arguments() const;
  /// The node with this user-visible name among inputs and params, if any.
  std::optional<NodeId> find_argument(const std::string &name) const;
  /// Nodes that use `id` as an input (and whether it is an output).
  std::vector<NodeId> users(NodeId id) const;
  bool is_output(NodeId id) const;

  /// Checks every invariant again (inputs exist and come first, each node's dims are what
  /// its op's shape rule gives, names are unique, mods load only captured tensors).
  /// Throws qkv::Error naming the first broken node.
  void verify() const;
  /// A stable, diffable text form.
  std::string str() const;
  /// str(), then every node's attributes through attrs_key: the kernel cache's key, which
  /// stays complete even where str() shows an op's attributes its own way.
  std::string key_text() const;
  /// Structural hash: equal for graphs that compute the same thing with the same
  /// argument and output names (node names and creation details do not count).
  std::uint64_t hash() const;

  // ---- building (for op builders) ----
  Value add_node(OpKind op, const std::vector<Value> &inputs, Attrs attrs, DType dtype,
                 std::vector<Dim> dims, std::string name = "");

private:
  Value add_argument(OpKind op, const std::string &name, DType dtype,
                     const std::vector<Dim> &dims);
  std::string name_;
  std::vector<Node> nodes_;
  std::vector<std::pair<std::string, NodeId>> outputs_;
  std::map<std::string, DimDef> dims_;
};

// ---- op builders (shape rules in dsl/lib/ops.cpp) ----------------------------------

Value matmul(Value a, Value b);
Value linear(Value x, Value w);
Value linear(Value x, Value w, Value bias);
/// Swaps two axes (negative counts from the end). transpose(k) swaps the last two.
Value transpose(Value x, std::int64_t axis_a = -2, std::int64_t axis_b = -1);
Value transpose(Value x, const std::string &dim_a, const std::string &dim_b);
Value scale(Value x, double factor);
/// add, sub, mul, div and every other op of QKV_BROADCAST_BINARY.
#define QKV_DECLARE_BINARY(kind, builder, bound, summary) Value builder(Value a, Value b);
QKV_BROADCAST_BINARY(QKV_DECLARE_BINARY)
#undef QKV_DECLARE_BINARY
/// x + y where both have exactly the same dims (a transformer's residual stream).
Value residual(Value x, Value y);
Value softmax(Value x, std::int64_t axis = -1);
/// Softmax over the axis named `dim` (an error if the name is on two axes).
Value softmax(Value x, const std::string &dim);
/// (..., L, H*Dh) -> (..., H, L, Dh): the last axis must have extent heads*head_dim.
Value split_heads(Value x, const Dim &heads, const Dim &head_dim);
/// (..., H, L, Dh) -> (..., L, H*Dh), or (..., L, out) when `out` (extent H*Dh) is given.
Value merge_heads(Value x);
Value merge_heads(Value x, const Dim &out);
/// Joins along `axis`; the result's axis is named a+b+... unless `out` is given.
Value concat(const std::vector<Value> &xs, std::int64_t axis = -1);
Value concat(const std::vector<Value> &xs, std::int64_t axis, const Dim &out);

Value mask(Value scores, const MaskFn &m);
template <class F>
  requires(!std::same_as<std::decay_t<F>, MaskFn>)
Value mask(Value scores, F &&f) {
  return mask(scores, mask_fn(f));
}
Value score_mod(Value scores, const ScoreFn &s);
template <class F>
  requires(!std::same_as<std::decay_t<F>, ScoreFn>)
Value score_mod(Value scores, F &&f) {
  return score_mod(scores, score_fn(f));
}

/// x + PE over x's last two axes (position, feature): PE[p, 2i] = sin(p / base^(2i/D)),
/// PE[p, 2i+1] = cos(p / base^(2i/D)), p counted from `offset`.
Value sinusoidal_pe(Value x, double base = 10000, std::int64_t offset = 0);
struct RopeOptions {
  double base = 10000;
  bool interleaved = false; // GPT-J pairs (2i,2i+1); default Llama/NeoX halves (i, i+Dh/2)
  std::int64_t offset = 0;  // position of the first row
};
/// Rotates (x_a, x_b) pairs of the last axis by angle p * base^(-2i/Dh), p = position on
/// the second-to-last axis.
Value rope(Value x, RopeOptions opts = {});
/// The same with each row's position read from `positions` (integer; (L) for every
/// batch, or (B, L) with B the first dim of x): a decode step's tokens sit at the cache's
/// length, which differs per sequence. opts.offset must be 0.
Value rope(Value x, Value positions, RopeOptions opts = {});
Value layer_norm(Value x, double eps = 1e-5);
Value layer_norm(Value x, Value gamma, Value beta, double eps = 1e-5);
Value rms_norm(Value x, double eps = 1e-6);
Value rms_norm(Value x, Value gamma, double eps = 1e-6);
/// Exact (erf) GELU, or the tanh approximation.
Value gelu(Value x, bool approximate = false);
/// elu(x) = x > 0 ? x : alpha (e^x - 1); softcap(x, cap) = cap * tanh(x / cap), cap > 0
/// (Gemma 2's logit soft-capping): every activation of QKV_SCALAR_ACTIVATIONS.
#define QKV_DECLARE_SCALAR_ACTIVATION(kind, builder, attribute, default_value, range, bound,       \
                                      summary)                                                     \
  Value builder(Value x, double attribute QKV_DEFAULT_ARG(default_value));
QKV_SCALAR_ACTIVATIONS(QKV_DECLARE_SCALAR_ACTIVATION)
#undef QKV_DECLARE_SCALAR_ACTIVATION
/// silu(x) = x * sigmoid(x); softplus(x) = log(1 + e^x), computed without overflow (Mamba's
/// step sizes, smooth ReLU); sigmoid(x) = 1 / (1 + e^-x): every activation of
/// QKV_PLAIN_ACTIVATIONS.
#define QKV_DECLARE_ACTIVATION(kind, builder, bound, summary) Value builder(Value x);
QKV_PLAIN_ACTIVATIONS(QKV_DECLARE_ACTIVATION)
#undef QKV_DECLARE_ACTIVATION
/// swiglu(gate, up) = silu(gate) * up; linformer_project(x, e): x (..., S, D) projected
/// along S by e (K', S), e . x -> (..., K', D) (Linformer); merge_lse(la, lb) = log(e^la +
/// e^lb), the log-sum-exp of two merged partial attentions (-inf where both are): every op
/// of QKV_TENSOR_PAIR_OPS.
#define QKV_DECLARE_PAIR(kind, builder, a, b, rule, bound, summary) Value builder(Value a, Value b);
QKV_TENSOR_PAIR_OPS(QKV_DECLARE_PAIR)
#undef QKV_DECLARE_PAIR
Value embedding(Value ids, Value table);
Value linear_attention(Value q, Value k, Value v, FeatureMap phi = FeatureMap::EluPlusOne);

/// Keys or values of a KV cache, read in place, followed by this step's new rows:
/// `past` (B, Hkv, C, Dh) holds each sequence's first lengths[b] rows (`lengths` (B),
/// integer, 0 <= lengths[b] <= C); `fresh` (B, Hkv, n, Dh) holds the n rows this step
/// adds. The result (B, Hkv, C+n, Dh) is, for sequence b, past's rows [0, lengths[b]),
/// then fresh's n rows, then zeros. Attention over it masks the rows past lengths[b] + n
/// with cache_mask, and the compiled kernel then reads past and fresh where they are:
/// no row of the cache is copied.
Value cache_view(Value past, Value lengths, Value fresh);
/// The same over a paged cache: `pool` (P, Hkv, page, Dh) holds P pages of `page` rows;
/// `table` (B, M), integer, names the page holding rows [m*page, (m+1)*page) of sequence
/// b. The result is (B, Hkv, M*page+n, Dh).
Value paged_cache_view(Value pool, Value table, Value lengths, Value fresh);
/// The mask for attention over a cache view: query i of sequence b, at position
/// lengths[b] + i, sees keys 0 .. lengths[b] + i (causal over cache and new rows).
MaskFn cache_mask(Value lengths);

/// attention(q, k, v) with q (..., Hq, L, Dh), k (..., Hkv, S, Dh), v (..., Hkv, S, Dv),
/// rank 2 (L, Dh), 3 (H, L, Dh) or 4 (B, H, L, Dh); Hq a multiple of Hkv (GQA/MQA).
/// The node exists once attention() returns; .scale/.mask/.score_mod update it and must
/// be called before the result is used.
class Attention {
public:
  Attention(Value node) : v_(node) {}
  Attention &scale(double s);
  Attention &mask(const MaskFn &m);
  template <class F>
    requires(!std::same_as<std::decay_t<F>, MaskFn>)
  Attention &mask(F &&f) {
    return mask(mask_fn(f));
  }
  Attention &score_mod(const ScoreFn &s);
  template <class F>
    requires(!std::same_as<std::decay_t<F>, ScoreFn>)
  Attention &score_mod(F &&f) {
    return score_mod(score_fn(f));
  }
  Value value() const { return v_; }
  operator Value() const { return v_; }
  /// The log-sum-exp of each query row's scores as the softmax sees them (scaled,
  /// modified, masked): (..., Hq, L), -inf for a fully masked row. With it the attention
  /// is a partial result that merge_attention combines exactly with another over other
  /// keys (ring attention, split KV). The same fused kernel computes both. Call it after
  /// .scale/.mask/.score_mod; the attention must be f32 or f64.
  Value lse() const;

private:
  void check_unused(const char *what) const;
  Value v_;
};
Attention attention(Value q, Value k, Value v);

/// Two partial attentions of the same queries over disjoint sets of keys, merged into
/// the attention over all of them: out = (e^(la - m) oa + e^(lb - m) ob) / (e^(la - m) +
/// e^(lb - m)), m = max(la, lb), per query row; 0 where both rows are fully masked.
/// oa, ob (..., H, L, Dv); la, lb (..., H, L), their Attention::lse().
Value merge_attention(Value oa, Value la, Value ob, Value lb);
/// The log-sum-exp of the merged partial is merge_lse(la, lb) (above).

// Operators for the seeds' notation: a + b, a - b, a * b (elementwise), x * 0.125.
inline Value operator+(Value a, Value b) { return add(a, b); }
inline Value operator-(Value a, Value b) { return sub(a, b); }
inline Value operator*(Value a, Value b) { return mul(a, b); }
inline Value operator/(Value a, Value b) { return div(a, b); }
inline Value operator*(Value a, double s) { return scale(a, s); }
inline Value operator*(double s, Value a) { return scale(a, s); }
inline Value operator/(Value a, double s) { return scale(a, 1.0 / s); }

// ---- run-time dim binding (shared by the interpreter and compiled kernels) ----------

using Shape = std::vector<std::int64_t>;
using DimBindings = std::map<std::string, std::int64_t>;

/// Binds every dim of the graph from the shapes and dtypes of the given arguments
/// (inputs and params by name). Throws qkv::Error on a missing or unknown argument, a
/// wrong rank or dtype, a static dim with another extent, or one dim given two extents.
DimBindings bind_dims(const Graph &g, const std::map<std::string, std::pair<DType, Shape>> &args);
/// `given` plus every static dim and every derived dim (H*Dh, A+B) computable from them.
/// Throws qkv::Error when `given` names a dim the graph does not have, gives a static dim
/// another extent than its own, or when the given extents contradict each other.
DimBindings complete_dims(const Graph &g, DimBindings given);
/// The concrete shape of dims under bindings.
Shape resolve(const std::vector<Dim> &dims, const DimBindings &b);

} // namespace qkv
