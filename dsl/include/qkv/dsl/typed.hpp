// The typed front end: named dims checked at compile time.
//
//   constexpr auto L = qkv::dim<"L">;      // bound at run time
//   constexpr auto D = qkv::dim<"D", 512>; // static
//   auto x = g.input<qkv::f32>("x", L, D); // TypedValue<f32, NamedDim<"L">, NamedDim<"D", 512>>
//   auto y = linear(x, w);                 // its dims computed at compile time
//
// Every typed op checks its shape rule at compile time: the constexpr function of
// <qkv/dsl/shape_rules.hpp> that the untyped builders (dsl/lib/op_table.cpp) and the MLIR
// dialect's verifier also call, so each rule is written once. The typed layer evaluates it
// over its dims' names and extents and asserts on the verdict: a broken rule does not
// compile, and the compiler's "static assertion failed due to requirement
// 'qkv::rules::holds<qkv::ops::matmul, qkv::shape::Rule::matmul_contraction_dims_match,
// NamedDim<"Dh", 64>, NamedDim<"D", 512>>::value'" names the rule and both dims. The
// verdict also says where each dim of the result comes from, from which the result's type
// is made. After the check the op calls the untyped builder (there is one implementation)
// and wraps its result; in debug builds the wrapper checks that the untyped node's dims are
// the ones computed here, which catches the two layers drifting.
//
// Two typed dims are the same dim when they have the same name and extent (the rules'
// shape::same); a graph holds one extent per name, so dims with one name and two extents
// could never meet in a valid graph.
//
// Boost.Hana holds the dim lists (hana::tuple_t) and finds a dim by its index or name.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <boost/hana/at.hpp>
#include <boost/hana/index_if.hpp>
#include <boost/hana/integral_constant.hpp>
#include <boost/hana/length.hpp>
#include <boost/hana/optional.hpp>
#include <boost/hana/tuple.hpp>
#include <boost/hana/type.hpp>

#include <qkv/dsl/graph.hpp>
#include <qkv/dsl/shape_rules.hpp>

// Run-time cross-check of typed dims against the untyped node (debug builds by default).
#ifndef QKV_TYPED_CHECKS
#ifdef NDEBUG
#define QKV_TYPED_CHECKS 0
#else
#define QKV_TYPED_CHECKS 1
#endif
#endif

namespace qkv {

// ---- names as template arguments ------------------------------------------------------

/// A string usable as a template argument: dim<"L">. N is the length without the NUL.
template <std::size_t N> struct fixed_string {
  char chars[N + 1] = {};

  constexpr fixed_string() = default;
  constexpr fixed_string(const char (&s)[N + 1]) {
    for (std::size_t i = 0; i <= N; ++i)
      chars[i] = s[i];
  }
  static constexpr std::size_t size() { return N; }
  constexpr std::string_view view() const { return std::string_view(chars, N); }
  template <std::size_t M> constexpr bool operator==(const fixed_string<M> &o) const {
    return view() == o.view();
  }
};
template <std::size_t M> fixed_string(const char (&)[M]) -> fixed_string<M - 1>;

namespace detail {

constexpr bool is_identifier(std::string_view s) {
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (s.empty() || !alpha(s[0]))
    return false;
  for (char c : s)
    if (!alpha(c) && !(c >= '0' && c <= '9') && c != '\'')
      return false;
  return true;
}

constexpr std::int64_t product_extent(std::int64_t a, std::int64_t b) {
  return a == kDynamic || b == kDynamic ? kDynamic : a * b;
}

template <std::size_t N> struct name_builder {
  fixed_string<N> s;
  std::size_t at = 0;
  constexpr void put(std::string_view part) {
    for (char c : part)
      s.chars[at++] = c;
  }
};

/// `spell` (shape::spell_product or spell_sum, the one spelling of derived dims' names)
/// into a fixed_string of exactly its length, N.
template <std::size_t N, class Spell> constexpr auto spelled_name(Spell spell) {
  name_builder<N> b;
  spell([&](std::string_view piece) { b.put(piece); });
  return b.s;
}

// The spellings as function objects (a lambda naming the fixed_string parameters trips
// clang's deduction of their type).
template <fixed_string A, fixed_string B> struct spell_product {
  template <class Put> constexpr void operator()(Put put) const {
    shape::spell_product(A.view(), B.view(), put);
  }
};

template <fixed_string... Ns>
inline constexpr std::array<std::string_view, sizeof...(Ns)> name_parts{Ns.view()...};

template <const auto &Parts> struct spell_sum {
  template <class Put> constexpr void operator()(Put put) const {
    shape::spell_sum(
        Parts.size(), [](std::size_t i) { return Parts[i]; }, put);
  }
};

template <fixed_string A, fixed_string B> constexpr auto product_name() {
  constexpr spell_product<A, B> spell{};
  return spelled_name<shape::spelled_size(spell)>(spell);
}

template <fixed_string... Ns> constexpr auto sum_name() {
  constexpr spell_sum<name_parts<Ns...>> spell{};
  return spelled_name<shape::spelled_size(spell)>(spell);
}

} // namespace detail

// ---- named dims ----------------------------------------------------------------------

/// A dim with its name and extent in the type: NamedDim<"Dh", 64>, NamedDim<"L"> (bound at
/// run time). Write them with qkv::dim<"Dh", 64>; they convert to the untyped qkv::Dim.
template <fixed_string Name, std::int64_t Extent = kDynamic> struct NamedDim {
  static_assert(Name.size() > 0, "a dim needs a non-empty name");
  static_assert(Extent == kDynamic || Extent >= 1,
                "a dim's extent must be positive, or qkv::kDynamic for a dim bound at run time");

  static constexpr auto name = Name;
  static constexpr std::int64_t extent = Extent;
  static constexpr bool is_static = Extent != kDynamic;

  Dim untyped() const { return Dim(std::string(Name.view()), Extent); }
  operator Dim() const { return untyped(); }
};

template <class T> struct is_named_dim : std::false_type {};
template <fixed_string N, std::int64_t E> struct is_named_dim<NamedDim<N, E>> : std::true_type {};
template <class T>
inline constexpr bool is_named_dim_v = is_named_dim<std::remove_cvref_t<T>>::value;

namespace detail {
template <fixed_string Name, std::int64_t Extent> constexpr NamedDim<Name, Extent> user_dim() {
  static_assert(is_identifier(Name.view()),
                "qkv::dim<\"Name\">: a dim name must be an identifier (letters, digits, _); "
                "derived dims such as H*Dh are written H * Dh");
  return {};
}
} // namespace detail

/// qkv::dim<"L"> (bound at run time) or qkv::dim<"D", 512> (static).
template <fixed_string Name, std::int64_t Extent = kDynamic>
inline constexpr NamedDim<Name, Extent> dim = detail::user_dim<Name, Extent>();

/// H * Dh: the dim named "H*Dh" whose extent is the product (dynamic if either is), as
/// qkv::product() makes it; what merge_heads produces and split_heads accepts.
template <fixed_string A, std::int64_t EA, fixed_string B, std::int64_t EB>
constexpr auto operator*(NamedDim<A, EA>, NamedDim<B, EB>) {
  return NamedDim<detail::product_name<A, B>(), detail::product_extent(EA, EB)>{};
}

/// A + B: the dim named "A+B" whose extent is the sum, as qkv::sum() (and concat) make it.
template <fixed_string A, std::int64_t EA, fixed_string B, std::int64_t EB>
constexpr auto operator+(NamedDim<A, EA>, NamedDim<B, EB>) {
  constexpr std::int64_t e = EA == kDynamic || EB == kDynamic ? kDynamic : EA + EB;
  return NamedDim<detail::sum_name<A, B>(), e>{};
}

/// A list of dims as one type. The rules take shapes in this form so that a failed check
/// prints them.
template <class... D> struct dim_list {};

template <class DT, class... Dims> class TypedValue;
template <class DT, class... Dims> class TypedAttention;

namespace detail {

namespace hana = boost::hana;

template <class T>
inline constexpr bool is_dtype_tag =
    std::is_same_v<T, f32> || std::is_same_v<T, f64> || std::is_same_v<T, f16> ||
    std::is_same_v<T, bf16> || std::is_same_v<T, i32> || std::is_same_v<T, i64>;

/// The type held by a hana::type object (or a reference to one).
template <class T> using type_of = typename std::remove_cvref_t<T>::type;

template <std::int64_t Axis, std::size_t Rank> constexpr std::size_t normalize_axis() {
  return static_cast<std::size_t>(Axis < 0 ? Axis + static_cast<std::int64_t>(Rank) : Axis);
}

template <class Types>
inline constexpr std::size_t length_v = decltype(hana::length(std::declval<Types>()))::value;

/// The I-th dim of a hana::tuple_t, counted from the back when I is negative.
template <std::int64_t I, class Types>
using dim_at =
    type_of<decltype(hana::at_c<normalize_axis<I, length_v<Types>>()>(std::declval<Types>()))>;

/// What the typed layer knows about a typed value's type.
template <class TV> struct traits;
template <class DT, class... D> struct traits<TypedValue<DT, D...>> {
  using dtype = DT;
  using list = dim_list<D...>;
  static constexpr std::size_t rank = sizeof...(D);
  static constexpr auto types = hana::tuple_t<D...>;
  template <std::int64_t I> using dim = dim_at<I, decltype(types)>;
};
template <class DT, class... D>
struct traits<TypedAttention<DT, D...>> : traits<TypedValue<DT, D...>> {};

template <class T> inline constexpr bool is_typed_value = false;
template <class DT, class... D> inline constexpr bool is_typed_value<TypedValue<DT, D...>> = true;
template <class DT, class... D>
inline constexpr bool is_typed_value<TypedAttention<DT, D...>> = true;

} // namespace detail

// ---- the rules ----------------------------------------------------------------------------
//
// Each trait is true when its rule holds; they exist so that a failing static_assert prints
// the dims (and dtypes) it checked. Op tags (qkv::ops::matmul) say which op a shared rule
// was checked for.

namespace ops {
struct matmul;
struct linear;
struct transpose;
struct scale;
#define QKV_BINARY_TAG(kind, builder, bound, summary) struct builder;
QKV_BROADCAST_BINARY(QKV_BINARY_TAG)
#undef QKV_BINARY_TAG
struct residual;
struct softmax;
struct split_heads;
struct merge_heads;
struct concat;
struct mask;
struct score_mod;
struct sinusoidal_pe;
struct rope;
struct layer_norm;
struct rms_norm;
struct gelu;
#define QKV_SCALAR_ACTIVATION_TAG(kind, builder, attribute, default_value, range, bound, summary)  \
  struct builder;
QKV_SCALAR_ACTIVATIONS(QKV_SCALAR_ACTIVATION_TAG)
#undef QKV_SCALAR_ACTIVATION_TAG
#define QKV_ACTIVATION_TAG(kind, builder, bound, summary) struct builder;
QKV_PLAIN_ACTIVATIONS(QKV_ACTIVATION_TAG)
#undef QKV_ACTIVATION_TAG
#define QKV_PAIR_TAG(kind, builder, a, b, rule, bound, summary) struct builder;
QKV_TENSOR_PAIR_OPS(QKV_PAIR_TAG)
#undef QKV_PAIR_TAG
struct embedding;
struct attention;
struct linear_attention;
struct cache_view;
struct paged_cache_view;
struct cache_mask;
struct attention_lse;
struct merge_attention;
} // namespace ops

namespace rules {

/// True when the rule holds. The typed ops check the shared shape rules
/// (<qkv/dsl/shape_rules.hpp>) at compile time and assert on this trait, so that a broken
/// rule's static_assert prints the op, the Rule and what it is about: the dims it compared,
/// or the dtypes, or the shapes, e.g.
///   holds<qkv::ops::matmul, qkv::shape::Rule::matmul_contraction_dims_match,
///         qkv::NamedDim<{"Dh"}, 64>, qkv::NamedDim<{"D"}, 512>>
template <class Op, shape::Rule R, class... About> struct holds {
  static constexpr bool value = R == shape::Rule::holds;
};

// The rules of the typed layer's own forms (loads in mods, constants, axes named by dims),
// which have no op of the table.
template <class Op, class Dim, class Dims> struct dim_is_present;
template <class Op, class Dim, class... D> struct dim_is_present<Op, Dim, dim_list<D...>> {
  static constexpr bool value = ((D::name == Dim::name) || ...);
};
template <class Op, class Dim, class Dims> struct dim_is_not_repeated;
template <class Op, class Dim, class... D> struct dim_is_not_repeated<Op, Dim, dim_list<D...>> {
  static constexpr bool value = ((D::name == Dim::name ? 1 : 0) + ... + 0) <= 1;
};
template <class Tensor, std::size_t NumIndices> struct load_has_one_index_per_dim {
  static constexpr bool value = Tensor::rank == NumIndices;
};
template <class Tensor, class Index> struct load_index_is_integer {
  static constexpr bool value = detail::is_int_like<Index>;
};
template <class Dims> struct constant_dims_are_static;
template <class... D> struct constant_dims_are_static<dim_list<D...>> {
  static constexpr bool value = (D::is_static && ...);
};

} // namespace rules

// ---- typed values --------------------------------------------------------------------------

namespace detail {
struct typed_access;
}

/// A graph value whose dtype and dims are part of its type. It wraps a qkv::Value (take it
/// with .value(); there is deliberately no implicit conversion, so an untyped builder cannot
/// be reached by accident) and, like Value, refers to its Graph.
template <class DT, class... Dims> class TypedValue {
  static_assert(detail::is_dtype_tag<DT>,
                "TypedValue<DT, dims...>: DT must be qkv::f32, f64, f16, bf16, i32 or i64");
  static_assert((is_named_dim_v<Dims> && ...),
                "TypedValue<DT, dims...>: every dim must be a qkv::NamedDim (qkv::dim<\"L\">)");

public:
  using dtype_tag = DT;
  static constexpr DType dtype = DT::value;
  static constexpr std::size_t rank = sizeof...(Dims);
  /// The dims as a Hana tuple of NamedDim values: boost::hana::at_c<0>(x.dims).
  static constexpr boost::hana::tuple<Dims...> dims{};

  /// The untyped value, for the untyped API (runtime, compiler, model loaders).
  Value value() const { return v_; }
  const std::string &name() const { return v_.name(); }
  /// Names the node (for errors and the printed graph); returns *this.
  TypedValue named(const std::string &name) const {
    v_.named(name);
    return *this;
  }

  /// Loads inside a mod: slopes[h], bias(h, q - kv). One index per dim, each an integer
  /// (an IntExpr such as the b, h, q, kv a mod receives, or a C++ integer). A load from an
  /// integer tensor is an IntExpr, so it can index another tensor.
  template <class... I> auto operator()(const I &...idx) const {
    static_assert(rules::load_has_one_index_per_dim<TypedValue, sizeof...(I)>::value,
                  "a load from a tensor inside a mod needs exactly one index per dim of the "
                  "tensor (the tensor's type and the number of indices are the template "
                  "arguments above)");
    (check_index<I>(), ...);
    return loaded(v_.load({Expr(idx)...}));
  }
  template <class I> auto operator[](const I &i) const {
    static_assert(rules::load_has_one_index_per_dim<TypedValue, 1>::value,
                  "t[i] loads from a 1-D tensor; index a tensor with more dims as t(i, j, ...)");
    check_index<I>();
    return loaded(v_.load({Expr(i)}));
  }

  /// Whether an untyped value has exactly this dtype and these dims.
  static bool describes(const Value &v) {
    return v.dtype() == dtype && v.dims() == std::vector<Dim>{Dim(Dims{})...};
  }
  /// "f32 (B=?, L=?, D=512)": this type in the printer's notation.
  static std::string type_str() {
    return std::string(dtype_name(dtype)) + " " + describe_full({Dim(Dims{})...});
  }

protected:
  explicit TypedValue(Value v) : v_(v) {}

private:
  template <class I> static constexpr void check_index() {
    static_assert(rules::load_index_is_integer<TypedValue, I>::value,
                  "a tensor index inside a mod must be an integer: the b, h, q, kv the mod "
                  "receives (declare them auto or qkv::IntExpr, not qkv::Expr), a C++ integer, "
                  "len_q()/len_kv(), a load from an integer tensor, or + - * / % min max abs "
                  "select of those (the tensor and the index's type are the template arguments "
                  "above; a float, or an Expr whose type is known only at run time, cannot "
                  "index)");
  }
  static auto loaded(Expr e) {
    if constexpr (is_int(dtype))
      return IntExpr(e.ptr());
    else
      return e;
  }
  friend struct detail::typed_access;
  Value v_;
};

namespace detail {

struct typed_access {
  template <class TV> static TV make(Value v) { return TV(v); }
};

// On in debug builds; -DQKV_TYPED_CHECKS=1 turns it on everywhere. Keep one setting per
// program: wrap() is an inline template.
inline constexpr bool kTypedChecks = QKV_TYPED_CHECKS != 0;

/// Wraps what an untyped builder returned. With kTypedChecks, verifies that the dims the
/// typed layer computed are the ones the untyped layer built: a mismatch is a bug in qkv.
template <class TV> TV wrap(Value v, const char *op) {
  if constexpr (kTypedChecks)
    if (!TV::describes(v))
      internal_error(std::string(op) + ": the typed front end computed " + TV::type_str() +
                     " but the untyped builder made '" + v.name() + "' " +
                     std::string(dtype_name(v.dtype())) + " " + describe_full(v.dims()));
  return typed_access::make<TV>(v);
}

} // namespace detail

/// Views an untyped value as typed, checking at run time that it has this dtype and these
/// dims: as_typed<f32>(loaded, L, D). Throws qkv::Error when it does not.
template <class DT, class... D> TypedValue<DT, D...> as_typed(Value v, D...) {
  using TV = TypedValue<DT, D...>;
  if (!TV::describes(v))
    user_error("as_typed: '" + v.name() + "' is " + std::string(dtype_name(v.dtype())) + " " +
               describe_full(v.dims()) + ", not " + TV::type_str());
  return detail::typed_access::make<TV>(v);
}

// ---- leaves ----------------------------------------------------------------------------

namespace detail {
template <class DT, class... D> constexpr bool check_leaf() {
  static_assert(is_dtype_tag<DT>,
                "g.input<DT>, g.param<DT>, constant<DT>: DT must be qkv::f32, f64, f16, bf16, i32 "
                "or i64");
  static_assert((is_named_dim_v<D> && ...),
                "g.input<DT>(name, dims...): every dim must be typed, qkv::dim<\"L\"> or "
                "qkv::dim<\"D\", 512> (for qkv::Dim use g.input(name, dtype, {dims}))");
  return is_dtype_tag<DT> && (is_named_dim_v<D> && ...);
}
} // namespace detail

template <class DT, class... D> auto Graph::input(const std::string &name, D... dims) {
  if constexpr (detail::check_leaf<DT, D...>())
    return detail::wrap<TypedValue<DT, D...>>(input(name, DT::value, {Dim(dims)...}), "input");
}

template <class DT, class... D> auto Graph::param(const std::string &name, D... dims) {
  if constexpr (detail::check_leaf<DT, D...>())
    return detail::wrap<TypedValue<DT, D...>>(param(name, DT::value, {Dim(dims)...}), "param");
}

/// A constant stored in the graph: values row-major, every dim static.
template <class DT, class... D>
auto constant(Graph &g, const std::string &name, std::vector<double> values, D... dims) {
  if constexpr (detail::check_leaf<DT, D...>()) {
    static_assert(rules::constant_dims_are_static<dim_list<D...>>::value,
                  "constant<DT>: every dim of a constant must be static (qkv::dim<\"N\", 4>)");
    return detail::wrap<TypedValue<DT, D...>>(
        g.constant(name, {Dim(dims)...}, std::move(values), DT::value), "constant");
  }
}

// ---- the shared shape rules at compile time ----------------------------------------------

// A failed rule's static_assert says the rule's sentence (shape::summary) where the
// compiler takes a computed message (clang 17 on, as the C++26 extension it is in C++20;
// C++26 compilers), else a fixed one.
#if defined(__clang__) && __clang_major__ >= 17
#define QKV_RULE_ASSERT(cond, rule)                                                                \
  _Pragma("clang diagnostic push")                                                                 \
      _Pragma("clang diagnostic ignored \"-Wc++26-extensions\"") static_assert(                    \
          cond, ::qkv::shape::summary(rule));                                                      \
  _Pragma("clang diagnostic pop")
#elif defined(__cpp_static_assert) && __cpp_static_assert >= 202306L
#define QKV_RULE_ASSERT(cond, rule) static_assert(cond, ::qkv::shape::summary(rule))
#else
#define QKV_RULE_ASSERT(cond, rule)                                                                \
  static_assert(cond, "a shape rule is broken: the op, the rule and the dims or dtypes it "        \
                      "checked are the template arguments of qkv::rules::holds above")
#endif

namespace detail {

template <class... T> struct type_list {};

/// A typed value's dtype and dims as the shared rules see them.
template <class TV> struct view_of;
template <class DT, class... D> struct view_of<TypedValue<DT, D...>> {
  static constexpr std::array<shape::DimView, sizeof...(D)> dims{
      shape::DimView{D::name.view(), D::extent}...};
  static constexpr shape::TensorView value{DT::value, std::span<const shape::DimView>(dims)};
};
template <class DT, class... D>
struct view_of<TypedAttention<DT, D...>> : view_of<TypedValue<DT, D...>> {};

/// An op's operands, and the dims it was given (split_heads' H and Dh, an out dim).
template <class... TV> struct operands {
  using types = std::tuple<TV...>;
  static constexpr std::array<shape::TensorView, sizeof...(TV)> views{view_of<TV>::value...};
};
template <class... G> struct given {
  using types = std::tuple<G...>;
  static constexpr std::array<shape::DimView, sizeof...(G)> views{
      shape::DimView{G::name.view(), G::extent}...};
};

template <class Ops, std::size_t I> using operand_t = std::tuple_element_t<I, typename Ops::types>;
template <class Ops, int I, int D>
using operand_dim = typename traits<operand_t<Ops, static_cast<std::size_t>(I)>>::template dim<D>;

/// What a broken verdict's operand `Op` (dim `D`, -1 for the whole) is about, as types: the
/// dim, the dtype (rules about dtypes) or the shape.
template <shape::Rule R, class Ops, int Op, int D> constexpr auto about() {
  if constexpr (Op < 0)
    return type_list<>{};
  else if constexpr (D >= 0)
    return type_list<operand_dim<Ops, Op, D>>{};
  else if constexpr (R == shape::Rule::is_float_tensor || R == shape::Rule::is_integer_tensor ||
                     R == shape::Rule::same_dtype || R == shape::Rule::lse_attention_is_f32_or_f64)
    return type_list<typename traits<operand_t<Ops, Op>>::dtype>{};
  else
    return type_list<typename traits<operand_t<Ops, Op>>::list>{};
}

template <class Op, shape::Rule R, class... A, class... B>
constexpr bool assert_rule(type_list<A...>, type_list<B...>) {
  QKV_RULE_ASSERT((rules::holds<Op, R, A..., B...>::value), R);
  return R == shape::Rule::holds;
}
template <class... G> constexpr type_list<G...> as_list(std::tuple<G...> *) { return {}; }

/// Asserts that the verdict holds; false when it does not (the op then builds nothing, so
/// that one error is not followed by others about its result).
template <class Op, shape::Verdict V, class Ops, class Given = given<>> constexpr bool check() {
  using G = decltype(as_list(static_cast<typename Given::types *>(nullptr)));
  auto one = [](auto op, auto d) {
    constexpr int o = decltype(op)::value;
    if constexpr (o >= shape::kGiven)
      return G{};
    else
      return about<V.broken, Ops, o, decltype(d)::value>();
  };
  return assert_rule<Op, V.broken>(
      one(std::integral_constant<int, V.a>{}, std::integral_constant<int, V.da>{}),
      one(std::integral_constant<int, V.b>{}, std::integral_constant<int, V.db>{}));
}

/// The type of the result dim that `S` describes.
template <shape::DimSource S, class Ops, class Given> constexpr auto source_dim() {
  using K = shape::DimSource;
  if constexpr (S.kind == K::Operand)
    return operand_dim<Ops, S.op, S.dim>{};
  else if constexpr (S.kind == K::Given)
    return std::tuple_element_t<static_cast<std::size_t>(S.dim), typename Given::types>{};
  else if constexpr (S.kind == K::Product)
    return operand_dim<Ops, S.op, S.dim>{} * operand_dim<Ops, S.op2, S.dim2>{};
  else if constexpr (S.kind == K::Sum)
    return operand_dim<Ops, S.op, S.dim>{} + operand_dim<Ops, S.op2, S.dim2>{};
  else if constexpr (S.kind == K::ProductPlus)
    return operand_dim<Ops, S.op, S.dim>{} * operand_dim<Ops, S.op2, S.dim2>{} +
           operand_dim<Ops, S.op3, S.dim3>{};
  else
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return (operand_dim<Ops, static_cast<int>(I), S.dim>{} + ...);
    }
  (std::make_index_sequence<std::tuple_size_v<typename Ops::types>>{});
}

/// The typed result a verdict describes: TV<the dtype, the dims>.
template <template <class, class...> class TV, shape::Verdict V, class Ops, class Given,
          std::size_t... I>
auto result_type(std::index_sequence<I...>)
    -> TV<typename traits<operand_t<Ops, static_cast<std::size_t>(V.dtype_of)>>::dtype,
          decltype(source_dim<V.dims[I], Ops, Given>())...>;

template <shape::Verdict V, class Ops, class Given = given<>,
          template <class, class...> class TV = TypedValue>
using result_t = decltype(result_type<TV, V, Ops, Given>(
    std::make_index_sequence<static_cast<std::size_t>(V.rank)>{}));

} // namespace detail

// ---- ops --------------------------------------------------------------------------------
//
// Each op: its shared shape rule (<qkv/dsl/shape_rules.hpp>) evaluated at compile time over
// the operands' dims, a static_assert on the verdict, then the untyped builder, then its
// result wrapped with the dims the verdict describes. A broken rule gives one error, not
// a cascade: the op then returns one of its operands unbuilt.

/// (..., M, K) x (..., K, N) -> (..., M, N); a 2-D side broadcasts over the other's batch.
template <class DA, class... A, class DB, class... B>
auto matmul(const TypedValue<DA, A...> &a, const TypedValue<DB, B...> &b) {
  using Ops = detail::operands<TypedValue<DA, A...>, TypedValue<DB, B...>>;
  constexpr shape::Verdict v = shape::matmul(Ops::views);
  if constexpr (detail::check<ops::matmul, v, Ops>())
    return detail::wrap<detail::result_t<v, Ops>>(matmul(a.value(), b.value()), "matmul");
  else
    return a;
}

/// x (..., K) . w (K, N) -> (..., N).
template <class DX, class... X, class DW, class... W>
auto linear(const TypedValue<DX, X...> &x, const TypedValue<DW, W...> &w) {
  using Ops = detail::operands<TypedValue<DX, X...>, TypedValue<DW, W...>>;
  constexpr shape::Verdict v = shape::linear(Ops::views);
  if constexpr (detail::check<ops::linear, v, Ops>())
    return detail::wrap<detail::result_t<v, Ops>>(linear(x.value(), w.value()), "linear");
  else
    return x;
}

/// x (..., K) . w (K, N) + bias (N) -> (..., N).
template <class DX, class... X, class DW, class... W, class DB, class... Bi>
auto linear(const TypedValue<DX, X...> &x, const TypedValue<DW, W...> &w,
            const TypedValue<DB, Bi...> &bias) {
  using Ops = detail::operands<TypedValue<DX, X...>, TypedValue<DW, W...>, TypedValue<DB, Bi...>>;
  constexpr shape::Verdict v = shape::linear(Ops::views);
  if constexpr (detail::check<ops::linear, v, Ops>())
    return detail::wrap<detail::result_t<v, Ops>>(linear(x.value(), w.value(), bias.value()),
                                                  "linear");
  else
    return x;
}

/// Swaps axes A and B (negative counts from the end): transpose<0, 2>(x).
template <std::int64_t A, std::int64_t B, class DT, class... D>
auto transpose(const TypedValue<DT, D...> &x) {
  using Ops = detail::operands<TypedValue<DT, D...>>;
  constexpr shape::Verdict v = shape::transpose(Ops::views, A, B);
  if constexpr (detail::check<ops::transpose, v, Ops>())
    return detail::wrap<detail::result_t<v, Ops>>(transpose(x.value(), A, B), "transpose");
  else
    return x;
}

/// Swaps the last two axes: transpose(k).
template <class DT, class... D> auto transpose(const TypedValue<DT, D...> &x) {
  return transpose<-2, -1>(x);
}

namespace detail {
/// Checks that Dim names exactly one axis of D... and returns that axis.
template <class Op, class Dim, class... D> constexpr std::int64_t axis_of_dim() {
  static_assert(rules::dim_is_present<Op, Dim, dim_list<D...>>::value,
                "the tensor has no dim with this name (the dim asked for and the tensor's dims "
                "are the template arguments above)");
  static_assert(rules::dim_is_not_repeated<Op, Dim, dim_list<D...>>::value,
                "the dim's name is on two axes of the tensor; pass an axis number as a template "
                "argument instead");
  if constexpr (rules::dim_is_present<Op, Dim, dim_list<D...>>::value &&
                rules::dim_is_not_repeated<Op, Dim, dim_list<D...>>::value) {
    auto found = hana::index_if(hana::tuple_t<D...>, [](auto t) {
      return hana::bool_c<type_of<decltype(t)>::name == Dim::name>;
    });
    return std::remove_cvref_t<decltype(found.value())>::value;
  } else {
    return -1;
  }
}

/// An op checked by `rule`, a function of <qkv/dsl/shape_rules.hpp>, whose verdict gives
/// the result's type.
template <class Op, auto rule, class... TV, class Build>
auto op_by_rule(Build build, const char *name, const TV &...x) {
  using Ops = operands<TV...>;
  constexpr shape::Verdict v = rule(std::span<const shape::TensorView>(Ops::views));
  if constexpr (check<Op, v, Ops>())
    return wrap<result_t<v, Ops>>(build(x.value()...), name);
  else
    return std::get<0>(std::tie(x...));
}
} // namespace detail

/// Swaps the axes named by two dims: transpose(x, L, D).
template <class DT, class... D, class DimA, class DimB>
requires(is_named_dim_v<DimA> &&is_named_dim_v<DimB>) auto transpose(const TypedValue<DT, D...> &x,
                                                                     DimA, DimB) {
  constexpr std::int64_t a = detail::axis_of_dim<ops::transpose, DimA, D...>();
  constexpr std::int64_t b = detail::axis_of_dim<ops::transpose, DimB, D...>();
  if constexpr (a >= 0 && b >= 0)
    return transpose<a, b>(x);
  else // the rule above failed: one error, not a cascade about the result
    return x;
}

namespace detail {
template <class T> inline constexpr bool axis_is_a_template_argument = false;
} // namespace detail
// The untyped overloads take run-time axes and dim names. A typed result needs the axis at
// compile time, so these say where to put it (instead of "no matching function").
// Each returns x after its message, so that the one error is not followed by others.
template <class DT, class... D>
TypedValue<DT, D...> transpose(const TypedValue<DT, D...> &x, std::int64_t, std::int64_t) {
  static_assert(detail::axis_is_a_template_argument<DT>,
                "typed transpose takes its axes as template arguments, transpose<0, 2>(x), or as "
                "dims, transpose(x, L, D)");
  return x;
}
template <class DT, class... D>
TypedValue<DT, D...> softmax(const TypedValue<DT, D...> &x, std::int64_t) {
  static_assert(detail::axis_is_a_template_argument<DT>,
                "typed softmax takes its axis as a template argument, softmax<-1>(x), or as a "
                "dim, softmax(x, S)");
  return x;
}
template <class DT, class... D>
TypedValue<DT, D...> transpose(const TypedValue<DT, D...> &x, const std::string &,
                               const std::string &) {
  static_assert(detail::axis_is_a_template_argument<DT>,
                "typed transpose takes typed dims, transpose(x, L, D), not names, so that the "
                "result's dims are known at compile time");
  return x;
}
template <class DT, class... D>
TypedValue<DT, D...> softmax(const TypedValue<DT, D...> &x, const std::string &) {
  static_assert(detail::axis_is_a_template_argument<DT>,
                "typed softmax takes a typed dim, softmax(x, S), not a name, so that the axis is "
                "checked at compile time");
  return x;
}

/// x * factor.
template <class DT, class... D> auto scale(const TypedValue<DT, D...> &x, double factor) {
  return detail::op_by_rule<ops::scale, shape::same_shape>(
      [&](Value v) { return scale(v, factor); }, "scale", x);
}

// Elementwise a + b, a - b, a * b, a / b and every other op of QKV_BROADCAST_BINARY
// (op_lists.hpp): the shorter operand's dims end the longer's.
#define QKV_TYPED_BINARY(kind, builder, bound, summary)                                            \
  template <class DA, class... A, class DB, class... B>                                            \
  auto builder(const TypedValue<DA, A...> &a, const TypedValue<DB, B...> &b) {                     \
    using Ops = detail::operands<TypedValue<DA, A...>, TypedValue<DB, B...>>;                      \
    constexpr shape::Verdict v = shape::broadcast(Ops::views);                                     \
    if constexpr (detail::check<ops::builder, v, Ops>())                                           \
      return detail::wrap<detail::result_t<v, Ops>>(builder(a.value(), b.value()), #builder);      \
    else                                                                                           \
      return a;                                                                                    \
  }
QKV_BROADCAST_BINARY(QKV_TYPED_BINARY)
#undef QKV_TYPED_BINARY

/// x + y with exactly the same dims (a transformer's residual stream).
template <class DA, class... A, class DB, class... B>
auto residual(const TypedValue<DA, A...> &x, const TypedValue<DB, B...> &y) {
  return detail::op_by_rule<ops::residual, shape::same_two>(
      [](Value a, Value b) { return residual(a, b); }, "residual", x, y);
}

/// Softmax over axis Axis, by default the last: softmax(x), softmax<-2>(x).
template <std::int64_t Axis = -1, class DT, class... D>
auto softmax(const TypedValue<DT, D...> &x) {
  constexpr auto rule = [](std::span<const shape::TensorView> in) {
    return shape::softmax(in, Axis);
  };
  return detail::op_by_rule<ops::softmax, rule>([](Value v) { return softmax(v, Axis); }, "softmax",
                                                x);
}

/// Softmax over the axis named by a dim: softmax(scores, S).
template <class DT, class... D, class Dim>
requires is_named_dim_v<Dim>
auto softmax(const TypedValue<DT, D...> &x, Dim) {
  constexpr std::int64_t axis = detail::axis_of_dim<ops::softmax, Dim, D...>();
  if constexpr (axis >= 0)
    return softmax<axis>(x);
  else // the rule above failed: one error, not a cascade about the result
    return x;
}

/// (..., L, H*Dh) -> (..., H, L, Dh). The last dim must have extent H*Dh when static, or be
/// named H*Dh when dynamic; H must be static.
template <class DT, class... D, class H, class Dh>
requires(is_named_dim_v<H> &&is_named_dim_v<Dh>) auto split_heads(const TypedValue<DT, D...> &x,
                                                                  H heads, Dh head_dim) {
  using Ops = detail::operands<TypedValue<DT, D...>>;
  using Given = detail::given<H, Dh>;
  constexpr shape::Verdict v = shape::split_heads(Ops::views, Given::views);
  if constexpr (detail::check<ops::split_heads, v, Ops, Given>())
    return detail::wrap<detail::result_t<v, Ops, Given>>(split_heads(x.value(), heads, head_dim),
                                                         "split_heads");
  else
    return x;
}

/// (..., H, L, Dh) -> (..., L, H*Dh).
template <class DT, class... D> auto merge_heads(const TypedValue<DT, D...> &x) {
  using Ops = detail::operands<TypedValue<DT, D...>>;
  constexpr shape::Verdict v = shape::merge_heads(Ops::views, {});
  if constexpr (detail::check<ops::merge_heads, v, Ops>())
    return detail::wrap<detail::result_t<v, Ops>>(merge_heads(x.value()), "merge_heads");
  else
    return x;
}

/// (..., H, L, Dh) -> (..., L, Out), Out having H*Dh's extent when both are static, else
/// its name.
template <class DT, class... D, class Out>
requires is_named_dim_v<Out>
auto merge_heads(const TypedValue<DT, D...> &x, Out out_dim) {
  using Ops = detail::operands<TypedValue<DT, D...>>;
  using Given = detail::given<Out>;
  constexpr shape::Verdict v = shape::merge_heads(Ops::views, Given::views);
  if constexpr (detail::check<ops::merge_heads, v, Ops, Given>())
    return detail::wrap<detail::result_t<v, Ops, Given>>(merge_heads(x.value(), out_dim),
                                                         "merge_heads");
  else
    return x;
}

namespace detail {
/// Whether no argument of concat's but the last is a dim.
template <class... R> constexpr bool dim_only_last() {
  constexpr bool is_dim[] = {false, is_named_dim_v<R>...};
  for (std::size_t i = 1; i < sizeof...(R); ++i)
    if (is_dim[i])
      return false;
  return true;
}

/// concat's operands and given dims: the tensors, then a trailing dim if any.
template <class Tensors, class Given> struct concat_args {
  using tensors = Tensors;
  using dims = Given;
};
template <class... T> constexpr auto split_concat_args(type_list<T...> done, type_list<>) {
  return concat_args<operands<T...>, given<>>{};
}
template <class... T, class Next, class... Rest>
constexpr auto split_concat_args(type_list<T...>, type_list<Next, Rest...>) {
  if constexpr (is_named_dim_v<Next> && sizeof...(Rest) == 0)
    return concat_args<operands<T...>, given<Next>>{};
  else
    return split_concat_args(type_list<T..., Next>{}, type_list<Rest...>{});
}
} // namespace detail

/// Joins tensors along axis Axis, by default the last: concat(a, b), concat<1>(a, b, c).
/// The joined dim is named a+b+... with the summed extent; a dim passed last names it
/// instead, concat(a, b, Dh), and must have the summed extent when both are static, else be
/// named a+b.
template <std::int64_t Axis = -1, class DT, class... D, class... Rest>
requires((detail::is_typed_value<Rest> ||
          is_named_dim_v<Rest>)&&...) auto concat(const TypedValue<DT, D...> &first,
                                                  const Rest &...rest) {
  static_assert(detail::dim_only_last<Rest...>(),
                "concat: only the last argument may be a dim (the name of the joined dim)");
  if constexpr (!detail::dim_only_last<Rest...>()) {
    return first;
  } else {
    using Args = decltype(detail::split_concat_args(detail::type_list<TypedValue<DT, D...>>{},
                                                    detail::type_list<Rest...>{}));
    using Ops = typename Args::tensors;
    using Given = typename Args::dims;
    constexpr shape::Verdict v = shape::concat(Ops::views, Axis, Given::views);
    if constexpr (detail::check<ops::concat, v, Ops, Given>()) {
      std::vector<Value> xs{first.value()};
      auto push = [&](const auto &r) {
        if constexpr (detail::is_typed_value<std::remove_cvref_t<decltype(r)>>)
          xs.push_back(r.value());
      };
      (push(rest), ...);
      Value out;
      if constexpr (std::tuple_size_v<typename Given::types> == 1)
        out = concat(xs, Axis, std::tuple_element_t<0, typename Given::types>{});
      else
        out = concat(xs, Axis);
      return detail::wrap<detail::result_t<v, Ops, Given>>(out, "concat");
    } else {
      return first;
    }
  }
}

/// Scores where the mask_mod is false become -inf. Scores: (L, S), (H, L, S), (B, H, L, S).
template <class DT, class... D, class F> auto mask(const TypedValue<DT, D...> &scores, F &&m) {
  return detail::op_by_rule<ops::mask, shape::scores>(
      [&](Value s) { return mask(s, std::forward<F>(m)); }, "mask", scores);
}

/// Scores -> score_mod(score, b, h, q, kv).
template <class DT, class... D, class F> auto score_mod(const TypedValue<DT, D...> &scores, F &&s) {
  return detail::op_by_rule<ops::score_mod, shape::scores>(
      [&](Value x) { return score_mod(x, std::forward<F>(s)); }, "score_mod", scores);
}

/// x + sinusoidal positions over x's last two axes (position, feature).
template <class DT, class... D>
auto sinusoidal_pe(const TypedValue<DT, D...> &x, double base = 10000, std::int64_t offset = 0) {
  constexpr auto rule = [](std::span<const shape::TensorView> in) {
    return shape::same_shape_rank(in, 2);
  };
  return detail::op_by_rule<ops::sinusoidal_pe, rule>(
      [&](Value v) { return sinusoidal_pe(v, base, offset); }, "sinusoidal_pe", x);
}

/// Rotary position embedding over x's last two axes (L, Dh); Dh static and even.
template <class DT, class... D> auto rope(const TypedValue<DT, D...> &x, RopeOptions opts = {}) {
  return detail::op_by_rule<ops::rope, shape::rope>([&](Value v) { return rope(v, opts); }, "rope",
                                                    x);
}

/// rope with each row's position read from `positions`, integer, (L) or (B, L) with B
/// x's first dim and L its second-to-last; opts.offset must be 0.
template <class DT, class... D, class DP, class... P>
auto rope(const TypedValue<DT, D...> &x, const TypedValue<DP, P...> &positions,
          RopeOptions opts = {}) {
  return detail::op_by_rule<ops::rope, shape::rope>(
      [&](Value v, Value p) { return rope(v, p, opts); }, "rope", x, positions);
}

/// Normalises over the last axis to mean 0, variance 1.
template <class DT, class... D> auto layer_norm(const TypedValue<DT, D...> &x, double eps = 1e-5) {
  return detail::op_by_rule<ops::layer_norm, shape::norm>(
      [&](Value v) { return layer_norm(v, eps); }, "layer_norm", x);
}
/// layer_norm, then * gamma + beta, both (D) with D the last dim of x.
template <class DT, class... D, class DG, class... G, class DB, class... Be>
auto layer_norm(const TypedValue<DT, D...> &x, const TypedValue<DG, G...> &gamma,
                const TypedValue<DB, Be...> &beta, double eps = 1e-5) {
  return detail::op_by_rule<ops::layer_norm, shape::norm>(
      [&](Value v, Value g, Value b) { return layer_norm(v, g, b, eps); }, "layer_norm", x, gamma,
      beta);
}
/// x / sqrt(mean(x^2) + eps) over the last axis.
template <class DT, class... D> auto rms_norm(const TypedValue<DT, D...> &x, double eps = 1e-6) {
  return detail::op_by_rule<ops::rms_norm, shape::norm>([&](Value v) { return rms_norm(v, eps); },
                                                        "rms_norm", x);
}
/// rms_norm, then * gamma (D).
template <class DT, class... D, class DG, class... G>
auto rms_norm(const TypedValue<DT, D...> &x, const TypedValue<DG, G...> &gamma, double eps = 1e-6) {
  return detail::op_by_rule<ops::rms_norm, shape::norm>(
      [&](Value v, Value g) { return rms_norm(v, g, eps); }, "rms_norm", x, gamma);
}

/// Exact (erf) GELU, or the tanh approximation.
template <class DT, class... D> auto gelu(const TypedValue<DT, D...> &x, bool approximate = false) {
  return detail::op_by_rule<ops::gelu, shape::same_shape>(
      [&](Value v) { return gelu(v, approximate); }, "gelu", x);
}
/// elu(x, alpha), softcap(x, cap) and every other activation of QKV_SCALAR_ACTIVATIONS
/// (op_lists.hpp): the same dims and dtype, which must be a float; the attribute's range
/// is checked when the node is built.
#define QKV_TYPED_SCALAR_ACTIVATION(kind, builder, attribute, default_value, range, bound,         \
                                    summary)                                                       \
  template <class DT, class... D>                                                                  \
  auto builder(const TypedValue<DT, D...> &x, double attribute QKV_DEFAULT_ARG(default_value)) {   \
    return detail::op_by_rule<ops::builder, shape::same_shape>(                                    \
        [&](Value v) { return builder(v, attribute); }, #builder, x);                              \
  }
QKV_SCALAR_ACTIVATIONS(QKV_TYPED_SCALAR_ACTIVATION)
#undef QKV_TYPED_SCALAR_ACTIVATION
/// silu, softplus and every other activation of QKV_PLAIN_ACTIVATIONS (op_lists.hpp): the
/// same dims and dtype, which must be a float.
#define QKV_TYPED_ACTIVATION(kind, builder, bound, summary)                                        \
  template <class DT, class... D> auto builder(const TypedValue<DT, D...> &x) {                    \
    return detail::op_by_rule<ops::builder, shape::same_shape>([](Value v) { return builder(v); }, \
                                                               #builder, x);                       \
  }
QKV_PLAIN_ACTIVATIONS(QKV_TYPED_ACTIVATION)
#undef QKV_TYPED_ACTIVATION

/// swiglu(gate, up), linformer_project(x, e), merge_lse(la, lb) and every other op of
/// QKV_TENSOR_PAIR_OPS (op_lists.hpp): the list's shape rule, at compile time.
#define QKV_TYPED_PAIR(kind, builder, a, b, rule, bound, summary)                                  \
  template <class DA, class... A, class DB, class... B>                                            \
  auto builder(const TypedValue<DA, A...> &a, const TypedValue<DB, B...> &b) {                     \
    return detail::op_by_rule<ops::builder, shape::rule>(                                          \
        [](Value x, Value y) { return builder(x, y); }, #builder, a, b);                           \
  }
QKV_TENSOR_PAIR_OPS(QKV_TYPED_PAIR)
#undef QKV_TYPED_PAIR

/// table[ids]: ids (...) i32 or i64, table (V, D) -> (..., D) with the table's dtype.
template <class DI, class... I, class DT, class... T>
auto embedding(const TypedValue<DI, I...> &ids, const TypedValue<DT, T...> &table) {
  using Ops = detail::operands<TypedValue<DI, I...>, TypedValue<DT, T...>>;
  constexpr shape::Verdict v = shape::embedding(Ops::views);
  if constexpr (detail::check<ops::embedding, v, Ops>())
    return detail::wrap<detail::result_t<v, Ops>>(embedding(ids.value(), table.value()),
                                                  "embedding");
  else
    return table;
}

/// Keys or values of a KV cache read in place, then this step's rows: past (B, Hkv, C, Dh),
/// lengths (B) integer, fresh (B, Hkv, n, Dh) -> (B, Hkv, C+n, Dh).
template <class DP, class... P, class DL, class... Ls, class DF, class... F>
auto cache_view(const TypedValue<DP, P...> &past, const TypedValue<DL, Ls...> &lengths,
                const TypedValue<DF, F...> &fresh) {
  using Ops = detail::operands<TypedValue<DP, P...>, TypedValue<DL, Ls...>, TypedValue<DF, F...>>;
  constexpr shape::Verdict v = shape::cache_view(Ops::views);
  if constexpr (detail::check<ops::cache_view, v, Ops>())
    return detail::wrap<detail::result_t<v, Ops>>(
        cache_view(past.value(), lengths.value(), fresh.value()), "cache_view");
  else
    return fresh;
}

/// The same over a paged cache: pool (P, Hkv, page, Dh), table (B, M) integer -> (B, Hkv,
/// M*page+n, Dh).
template <class DP, class... P, class DT, class... T, class DL, class... Ls, class DF, class... F>
auto paged_cache_view(const TypedValue<DP, P...> &pool, const TypedValue<DT, T...> &table,
                      const TypedValue<DL, Ls...> &lengths, const TypedValue<DF, F...> &fresh) {
  using Ops = detail::operands<TypedValue<DP, P...>, TypedValue<DT, T...>, TypedValue<DL, Ls...>,
                               TypedValue<DF, F...>>;
  constexpr shape::Verdict v = shape::cache_view(Ops::views);
  if constexpr (detail::check<ops::paged_cache_view, v, Ops>())
    return detail::wrap<detail::result_t<v, Ops>>(
        paged_cache_view(pool.value(), table.value(), lengths.value(), fresh.value()),
        "paged_cache_view");
  else
    return fresh;
}

/// cache_mask over typed lengths (B), integer.
template <class DL, class... Ls> MaskFn cache_mask(const TypedValue<DL, Ls...> &lengths) {
  using Ops = detail::operands<TypedValue<DL, Ls...>>;
  constexpr shape::Verdict v = shape::lengths(Ops::views);
  detail::check<ops::cache_mask, v, Ops>();
  return cache_mask(lengths.value());
}

/// The typed result of attention(q, k, v): a TypedValue with qkv::Attention's fluent
/// .scale / .mask / .score_mod, which must come before the result is used.
template <class DT, class... Dims> class TypedAttention : public TypedValue<DT, Dims...> {
public:
  TypedAttention &scale(double s) {
    Attention(this->value()).scale(s);
    return *this;
  }
  template <class F> TypedAttention &mask(F &&m) {
    Attention(this->value()).mask(std::forward<F>(m));
    return *this;
  }
  template <class F> TypedAttention &score_mod(F &&s) {
    Attention(this->value()).score_mod(std::forward<F>(s));
    return *this;
  }
  TypedAttention named(const std::string &name) const {
    TypedValue<DT, Dims...>::named(name);
    return *this;
  }
  /// Attention::lse(): each query row's log-sum-exp, (..., Hq, L) (the dims without Dv).
  auto lse() const {
    using Ops = detail::operands<TypedValue<DT, Dims...>>;
    constexpr shape::Verdict v = shape::attention_lse(Ops::views);
    if constexpr (detail::check<ops::attention_lse, v, Ops>())
      return detail::wrap<detail::result_t<v, Ops>>(Attention(this->value()).lse(),
                                                    "attention_lse");
    else
      return static_cast<const TypedValue<DT, Dims...> &>(*this);
  }

private:
  friend struct detail::typed_access;
  explicit TypedAttention(Value v) : TypedValue<DT, Dims...>(v) {}
};

/// softmax(score_mod(scale * q.k^T) masked) . v with q (..., Hq, L, Dh), k (..., Hkv, S, Dh),
/// v (..., Hkv, S, Dv) -> (..., Hq, L, Dv); Hq a multiple of Hkv (GQA/MQA).
template <class DQ, class... Q, class DK, class... K, class DV, class... V>
auto attention(const TypedValue<DQ, Q...> &q, const TypedValue<DK, K...> &k,
               const TypedValue<DV, V...> &v) {
  using Ops = detail::operands<TypedValue<DQ, Q...>, TypedValue<DK, K...>, TypedValue<DV, V...>>;
  constexpr shape::Verdict r = shape::attention(Ops::views);
  if constexpr (detail::check<ops::attention, r, Ops>())
    return detail::wrap<detail::result_t<r, Ops, detail::given<>, TypedAttention>>(
        attention(q.value(), k.value(), v.value()).value(), "attention");
  else // the rule above failed: one error, not a cascade about the result
    return detail::typed_access::make<TypedAttention<DQ, Q...>>(q.value());
}

/// Two partial attentions merged by their log-sum-exps (merge_attention in graph.hpp):
/// oa, ob (..., H, L, Dv) with the same dims, la, lb their dims without Dv.
template <class DT, class... O, class DL, class... L, class D2, class... O2, class DL2, class... L2>
auto merge_attention(const TypedValue<DT, O...> &oa, const TypedValue<DL, L...> &la,
                     const TypedValue<D2, O2...> &ob, const TypedValue<DL2, L2...> &lb) {
  return detail::op_by_rule<ops::merge_attention, shape::merge_attention>(
      [](Value a, Value b, Value c, Value d) { return merge_attention(a, b, c, d); },
      "merge_attention", oa, la, ob, lb);
}

/// phi(q) (phi(k)^T v), normalised; the shape rules of attention.
template <class DQ, class... Q, class DK, class... K, class DV, class... V>
auto linear_attention(const TypedValue<DQ, Q...> &q, const TypedValue<DK, K...> &k,
                      const TypedValue<DV, V...> &v, FeatureMap phi = FeatureMap::EluPlusOne) {
  using Ops = detail::operands<TypedValue<DQ, Q...>, TypedValue<DK, K...>, TypedValue<DV, V...>>;
  constexpr shape::Verdict r = shape::attention(Ops::views);
  if constexpr (detail::check<ops::linear_attention, r, Ops>())
    return detail::wrap<detail::result_t<r, Ops>>(
        linear_attention(q.value(), k.value(), v.value(), phi), "linear_attention");
  else
    return q;
}

// ---- operators, as for Value in graph.hpp ----------------------------------------------

template <class DA, class... A, class DB, class... B>
auto operator+(const TypedValue<DA, A...> &a, const TypedValue<DB, B...> &b) {
  return add(a, b);
}
template <class DA, class... A, class DB, class... B>
auto operator-(const TypedValue<DA, A...> &a, const TypedValue<DB, B...> &b) {
  return sub(a, b);
}
template <class DA, class... A, class DB, class... B>
auto operator*(const TypedValue<DA, A...> &a, const TypedValue<DB, B...> &b) {
  return mul(a, b);
}
template <class DA, class... A, class DB, class... B>
auto operator/(const TypedValue<DA, A...> &a, const TypedValue<DB, B...> &b) {
  return div(a, b);
}
template <class DT, class... D> auto operator*(const TypedValue<DT, D...> &x, double s) {
  return scale(x, s);
}
template <class DT, class... D> auto operator*(double s, const TypedValue<DT, D...> &x) {
  return scale(x, s);
}
template <class DT, class... D> auto operator/(const TypedValue<DT, D...> &x, double s) {
  return scale(x, 1.0 / s);
}

} // namespace qkv
