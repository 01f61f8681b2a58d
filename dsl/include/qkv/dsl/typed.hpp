// The typed front end: named dims checked at compile time.
//
//   constexpr auto L = qkv::dim<"L">;      // bound at run time
//   constexpr auto D = qkv::dim<"D", 512>; // static
//   auto x = g.input<qkv::f32>("x", L, D); // TypedValue<f32, NamedDim<"L">, NamedDim<"D", 512>>
//   auto y = linear(x, w);                 // its dims computed at compile time
//
// Every typed op checks the same shape rule as the untyped builder in dsl/lib/ops.cpp, but
// with static_assert: a broken rule does not compile. Each assertion is on a trait of
// qkv::rules whose template arguments are the dims involved, so the compiler's "static
// assertion failed due to requirement 'qkv::rules::matmul_contraction_dims_match<
// NamedDim<"Dh", 64>, NamedDim<"D", 512>>::value'" names both dims, and the message after
// it states the rule. After the checks the op calls the untyped builder (there is one
// implementation) and wraps its result; in debug builds the wrapper checks that the
// untyped node's dims are the ones computed here, which catches the two layers drifting.
//
// Two typed dims are the same dim when they are the same type: same name and same extent.
// (The untyped layer compares names, and a graph holds one extent per name, so dims with
// one name and two extents could never meet in a valid graph.)
//
// Boost.Hana holds the dim lists (hana::tuple_t) and does the algebra: dropping, appending
// and concatenating dims, finding a dim by name, comparing lists.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <boost/hana/all_of.hpp>
#include <boost/hana/append.hpp>
#include <boost/hana/at.hpp>
#include <boost/hana/back.hpp>
#include <boost/hana/concat.hpp>
#include <boost/hana/drop_back.hpp>
#include <boost/hana/drop_front.hpp>
#include <boost/hana/if.hpp>
#include <boost/hana/index_if.hpp>
#include <boost/hana/integral_constant.hpp>
#include <boost/hana/length.hpp>
#include <boost/hana/optional.hpp>
#include <boost/hana/prepend.hpp>
#include <boost/hana/range.hpp>
#include <boost/hana/take_back.hpp>
#include <boost/hana/take_front.hpp>
#include <boost/hana/transform.hpp>
#include <boost/hana/tuple.hpp>
#include <boost/hana/type.hpp>
#include <boost/hana/unpack.hpp>

#include <qkv/dsl/graph.hpp>

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

// The same spelling as qkv::product() and qkv::sum() in dsl/lib/graph.cpp: a factor that
// is a sum is parenthesised ("(A+B)*C"); sums are joined flat ("H*Dh+X").
constexpr bool has_plus(std::string_view s) { return s.find('+') != std::string_view::npos; }

template <fixed_string A, fixed_string B> constexpr auto product_name() {
  constexpr bool wa = has_plus(A.view()), wb = has_plus(B.view());
  name_builder<A.size() + B.size() + 1 + 2 * (wa + wb)> b;
  b.put(wa ? "(" : "");
  b.put(A.view());
  b.put(wa ? ")*" : "*");
  b.put(wb ? "(" : "");
  b.put(B.view());
  b.put(wb ? ")" : "");
  return b.s;
}

template <fixed_string... Ns> constexpr auto sum_name() {
  name_builder<(Ns.size() + ...) + sizeof...(Ns) - 1> b;
  bool first = true;
  ((b.put(first ? "" : "+"), b.put(Ns.view()), first = false), ...);
  return b.s;
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

/// hana::tuple_t<D...>, or what Hana's algorithms make of one -> dim_list<D...>.
template <class Types> struct to_list;
template <class... T> struct to_list<hana::tuple<T...>> {
  using type = dim_list<typename T::type...>;
};
template <class Types> using list_t = typename to_list<std::remove_cvref_t<Types>>::type;

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

/// What a check returns when a rank check failed and there are no result dims.
struct failed {};
template <class T> inline constexpr bool ok = !std::is_same_v<std::remove_cvref_t<T>, failed>;

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
struct elu;
#define QKV_ACTIVATION_TAG(kind, builder, bound, summary) struct builder;
QKV_PLAIN_ACTIVATIONS(QKV_ACTIVATION_TAG)
#undef QKV_ACTIVATION_TAG
struct swiglu;
struct embedding;
struct attention;
struct linformer_project;
struct linear_attention;
struct cache_view;
struct paged_cache_view;
struct cache_mask;
struct attention_lse;
struct merge_attention;
struct merge_lse;
} // namespace ops

namespace rules {

template <class Op, class DT> struct is_float_tensor {
  static constexpr bool value = is_float(DT::value);
};
template <class Op, class DA, class DB> struct same_dtype {
  static constexpr bool value = std::is_same_v<DA, DB>;
};
template <class Op, std::size_t N, class Dims> struct rank_at_least;
template <class Op, std::size_t N, class... D> struct rank_at_least<Op, N, dim_list<D...>> {
  static constexpr bool value = sizeof...(D) >= N;
};
template <class Op, std::size_t N, class Dims> struct rank_is;
template <class Op, std::size_t N, class... D> struct rank_is<Op, N, dim_list<D...>> {
  static constexpr bool value = sizeof...(D) == N;
};
template <class Op, class Dims> struct rank_2_to_4;
template <class Op, class... D> struct rank_2_to_4<Op, dim_list<D...>> {
  static constexpr bool value = sizeof...(D) >= 2 && sizeof...(D) <= 4;
};
template <class Op, std::int64_t Axis, class Dims> struct axis_in_range;
template <class Op, std::int64_t Axis, class... D> struct axis_in_range<Op, Axis, dim_list<D...>> {
  static constexpr bool value =
      Axis >= -static_cast<std::int64_t>(sizeof...(D)) && Axis < std::int64_t{sizeof...(D)};
};
template <class Op, class A, class B> struct same_dims {
  static constexpr bool value = std::is_same_v<A, B>;
};

template <class ALast, class BSecondToLast> struct matmul_contraction_dims_match {
  static constexpr bool value = std::is_same_v<ALast, BSecondToLast>;
};
template <class BatchA, class BatchB> struct matmul_batch_dims_match {
  static constexpr bool value = std::is_same_v<BatchA, BatchB> ||
                                std::is_same_v<BatchA, dim_list<>> ||
                                std::is_same_v<BatchB, dim_list<>>;
};
template <class XLast, class WFirst> struct linear_input_dim_is_weight_first_dim {
  static constexpr bool value = std::is_same_v<XLast, WFirst>;
};
template <class BiasDims, class WOut> struct linear_bias_is_weight_out_dim {
  static constexpr bool value = std::is_same_v<BiasDims, dim_list<WOut>>;
};
template <class Op, class Shorter, class Longer> struct shorter_shape_ends_longer;
template <class Op, class... S, class... L>
struct shorter_shape_ends_longer<Op, dim_list<S...>, dim_list<L...>> {
  static constexpr bool value = [] {
    namespace hana = boost::hana;
    if constexpr (sizeof...(S) > sizeof...(L))
      return false;
    else
      return std::is_same_v<detail::list_t<decltype(hana::take_back(hana::tuple_t<L...>,
                                                                    hana::size_c<sizeof...(S)>))>,
                            dim_list<S...>>;
  }();
};
template <class Op, class Dim, class Dims> struct dim_is_present;
template <class Op, class Dim, class... D> struct dim_is_present<Op, Dim, dim_list<D...>> {
  static constexpr bool value = ((D::name == Dim::name) || ...);
};
template <class Op, class Dim, class Dims> struct dim_is_not_repeated;
template <class Op, class Dim, class... D> struct dim_is_not_repeated<Op, Dim, dim_list<D...>> {
  static constexpr bool value = ((D::name == Dim::name ? 1 : 0) + ... + 0) <= 1;
};
template <class Heads> struct split_heads_heads_are_static {
  static constexpr bool value = Heads::is_static;
};
/// A derived dim (H*Dh, A+B) matches a dim with its name, or a static one of its extent;
/// a dim with its name but another static extent does not (the parts were changed: 'H*Dh'(8)
/// does not split into 2 heads of 3).
template <class Derived, class Dim> struct derived_dim_matches {
  static constexpr bool both_static = Derived::is_static && Dim::is_static;
  static constexpr bool value =
      both_static ? Derived::extent == Dim::extent : Derived::name == Dim::name;
};
template <class Last, class Heads, class HeadDim>
struct split_heads_last_dim_is_heads_times_head_dim {
  static constexpr bool value = derived_dim_matches<decltype(Heads{} * HeadDim{}), Last>::value;
};
template <class Merged, class Out> struct merge_heads_out_is_heads_times_head_dim {
  static constexpr bool value = derived_dim_matches<Merged, Out>::value;
};
template <class First, class Other> struct concat_ranks_equal;
template <class... F, class... O> struct concat_ranks_equal<dim_list<F...>, dim_list<O...>> {
  static constexpr bool value = sizeof...(F) == sizeof...(O);
};
template <std::size_t Axis, class First, class Other> struct concat_dims_off_the_axis_match;
template <std::size_t Axis, class... F, class... O>
struct concat_dims_off_the_axis_match<Axis, dim_list<F...>, dim_list<O...>> {
  static constexpr bool value = [] {
    if constexpr (sizeof...(F) != sizeof...(O))
      return true; // concat_ranks_equal reports it
    else {
      constexpr bool same[] = {std::is_same_v<F, O>...};
      for (std::size_t i = 0; i < sizeof...(F); ++i)
        if (i != Axis && !same[i])
          return false;
      return true;
    }
  }();
};
template <class Sum, class Out> struct concat_out_is_sum_of_parts {
  static constexpr bool value = derived_dim_matches<Sum, Out>::value;
};
template <class Last> struct rope_last_dim_is_static_and_even {
  static constexpr bool value = Last::is_static && Last::extent % 2 == 0;
};
template <class Op, class ParamDims, class Last> struct norm_param_is_last_dim {
  static constexpr bool value = std::is_same_v<ParamDims, dim_list<Last>>;
};
template <class DT> struct embedding_ids_are_integer {
  static constexpr bool value = is_int(DT::value);
};
template <class Op, class DT> struct is_integer_tensor {
  static constexpr bool value = is_int(DT::value);
};
/// rope's positions are (L) or (B, L) of x (B, ..., L, Dh).
template <class Positions, class X> struct rope_positions_match_rows;
template <class... P, class... X> struct rope_positions_match_rows<dim_list<P...>, dim_list<X...>> {
  static constexpr bool value = [] {
    using xs = boost::hana::basic_tuple<X...>;
    constexpr std::size_t r = sizeof...(X);
    if constexpr (r < 2)
      return true; // rank_at_least reports it
    else {
      using rows = std::remove_cvref_t<decltype(boost::hana::at_c<r - 2>(xs{}))>;
      using first = std::remove_cvref_t<decltype(boost::hana::at_c<0>(xs{}))>;
      if constexpr (sizeof...(P) == 1)
        return (std::is_same_v<P, rows> && ...);
      else if constexpr (sizeof...(P) == 2 && r >= 3)
        return std::is_same_v<dim_list<P...>, dim_list<first, rows>>;
      else
        return false;
    }
  }();
};
template <class ProjectionLast, class SeqDim> struct linformer_projection_ends_in_seq_dim {
  static constexpr bool value = std::is_same_v<ProjectionLast, SeqDim>;
};
template <class Op, std::size_t QRank, std::size_t KRank, std::size_t VRank>
struct attention_ranks_equal {
  static constexpr bool value = QRank == KRank && QRank == VRank;
};
template <class Op, class QHeadDim, class KHeadDim> struct attention_q_k_head_dims_match {
  static constexpr bool value = std::is_same_v<QHeadDim, KHeadDim>;
};
template <class Op, class KSeq, class VSeq> struct attention_k_v_seq_dims_match {
  static constexpr bool value = std::is_same_v<KSeq, VSeq>;
};
template <class Op, class QBatch, class KBatch, class VBatch> struct attention_batch_dims_match {
  static constexpr bool value = std::is_same_v<QBatch, KBatch> && std::is_same_v<QBatch, VBatch>;
};
template <class Op, class KHeads, class VHeads> struct attention_k_v_heads_match {
  static constexpr bool value = std::is_same_v<KHeads, VHeads>;
};
template <class Op, class QHeads, class KVHeads> struct attention_grouped_heads_are_static {
  static constexpr bool value =
      std::is_same_v<QHeads, KVHeads> || (QHeads::is_static && KVHeads::is_static);
};
template <class Op, class QHeads, class KVHeads>
struct attention_query_heads_are_a_multiple_of_kv_heads {
  static constexpr bool value = std::is_same_v<QHeads, KVHeads> || !QHeads::is_static ||
                                !KVHeads::is_static || QHeads::extent % KVHeads::extent == 0;
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

/// Wraps `v` as TV<DT, D...> for the dims D... held by the hana::tuple_t `types`.
template <template <class, class...> class TV, class DT, class Types>
auto wrap_dims(Value v, Types types, const char *op) {
  return hana::unpack(types,
                      [&](auto... t) { return wrap<TV<DT, type_of<decltype(t)>...>>(v, op); });
}
template <class DT, class Types> auto wrap_dims(Value v, Types types, const char *op) {
  return wrap_dims<TypedValue, DT>(v, types, op);
}

template <class Op, class DT> constexpr void check_float() {
  static_assert(rules::is_float_tensor<Op, DT>::value,
                "this op needs float tensors (f32, f64, f16 or bf16); the op and the dtype it "
                "got are the template arguments above");
}
template <class Op, class DA, class DB> constexpr void check_same_dtype() {
  static_assert(rules::same_dtype<Op, DA, DB>::value,
                "the tensors of this op must have the same dtype; the op and both dtypes are the "
                "template arguments above");
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

// ---- ops --------------------------------------------------------------------------------
//
// Each op: the rule checks (static_assert), then the untyped builder, then its result
// wrapped with the dims computed here. Rank checks come first and guard the rest, so a
// wrong rank gives one error, not a cascade.

/// (..., M, K) x (..., K, N) -> (..., M, N); a 2-D side broadcasts over the other's batch.
template <class DA, class... A, class DB, class... B>
auto matmul(const TypedValue<DA, A...> &a, const TypedValue<DB, B...> &b) {
  namespace hana = boost::hana;
  detail::check_float<ops::matmul, DA>();
  detail::check_same_dtype<ops::matmul, DA, DB>();
  static_assert(rules::rank_at_least<ops::matmul, 2, dim_list<A...>>::value,
                "matmul: the left operand needs at least 2 dims (rows, cols)");
  static_assert(rules::rank_at_least<ops::matmul, 2, dim_list<B...>>::value,
                "matmul: the right operand needs at least 2 dims (rows, cols)");
  if constexpr (sizeof...(A) >= 2 && sizeof...(B) >= 2) {
    constexpr auto da = hana::tuple_t<A...>;
    constexpr auto db = hana::tuple_t<B...>;
    static_assert(rules::matmul_contraction_dims_match<detail::dim_at<-1, decltype(da)>,
                                                       detail::dim_at<-2, decltype(db)>>::value,
                  "matmul: contraction dims differ: the left operand's last dim must be the "
                  "right operand's second-to-last (both dims are the template arguments above)");
    constexpr auto ba = hana::drop_back(da, hana::size_c<2>);
    constexpr auto bb = hana::drop_back(db, hana::size_c<2>);
    static_assert(rules::matmul_batch_dims_match<detail::list_t<decltype(ba)>,
                                                 detail::list_t<decltype(bb)>>::value,
                  "matmul: batch dims differ: the dims before the last two must be equal, or one "
                  "side must be 2-D (both batch shapes are the template arguments above)");
    // As in infer_type: a 2-D left side takes the right side's batch dims.
    constexpr auto batch = hana::if_(hana::bool_c<sizeof...(A) == 2>, bb, ba);
    constexpr auto out =
        hana::append(hana::append(batch, hana::at_c<sizeof...(A) - 2>(da)), hana::back(db));
    return detail::wrap_dims<DA>(matmul(a.value(), b.value()), out, "matmul");
  }
  else // the rule above failed: one error, not a cascade about the result
    return a;
}

namespace detail {
/// linear's rules; the output dims x[:-1] + w[1].
template <class X, class W> constexpr auto check_linear() {
  using TX = traits<X>;
  using TW = traits<W>;
  check_float<ops::linear, typename TX::dtype>();
  check_same_dtype<ops::linear, typename TX::dtype, typename TW::dtype>();
  static_assert(rules::rank_at_least<ops::linear, 1, typename TX::list>::value,
                "linear: the input needs at least one dim");
  static_assert(rules::rank_is<ops::linear, 2, typename TW::list>::value,
                "linear: the weight must have 2 dims (in, out)");
  if constexpr (TX::rank >= 1 && TW::rank == 2) {
    static_assert(rules::linear_input_dim_is_weight_first_dim<typename TX::template dim<-1>,
                                                              typename TW::template dim<0>>::value,
                  "linear: the input's last dim must be the weight's first dim (both dims are "
                  "the template arguments above)");
    return hana::append(hana::drop_back(TX::types, hana::size_c<1>), hana::at_c<1>(TW::types));
  } else {
    return failed{};
  }
}
} // namespace detail

/// x (..., K) . w (K, N) -> (..., N).
template <class DX, class... X, class DW, class... W>
auto linear(const TypedValue<DX, X...> &x, const TypedValue<DW, W...> &w) {
  constexpr auto out = detail::check_linear<TypedValue<DX, X...>, TypedValue<DW, W...>>();
  if constexpr (detail::ok<decltype(out)>)
    return detail::wrap_dims<DX>(linear(x.value(), w.value()), out, "linear");
  else // the rule above failed: one error, not a cascade about the result
    return x;
}

/// x (..., K) . w (K, N) + bias (N) -> (..., N).
template <class DX, class... X, class DW, class... W, class DB, class... Bi>
auto linear(const TypedValue<DX, X...> &x, const TypedValue<DW, W...> &w,
            const TypedValue<DB, Bi...> &bias) {
  constexpr auto out = detail::check_linear<TypedValue<DX, X...>, TypedValue<DW, W...>>();
  detail::check_same_dtype<ops::linear, DX, DB>();
  if constexpr (detail::ok<decltype(out)>) {
    static_assert(
        rules::linear_bias_is_weight_out_dim<
            dim_list<Bi...>, typename detail::traits<TypedValue<DW, W...>>::template dim<1>>::value,
        "linear: the bias must be 1-D with the weight's output dim (the bias dims and "
        "that dim are the template arguments above)");
    return detail::wrap_dims<DX>(linear(x.value(), w.value(), bias.value()), out, "linear");
  }
  else // the rule above failed: one error, not a cascade about the result
    return x;
}

/// Swaps axes A and B (negative counts from the end): transpose<0, 2>(x).
template <std::int64_t A, std::int64_t B, class DT, class... D>
auto transpose(const TypedValue<DT, D...> &x) {
  namespace hana = boost::hana;
  static_assert(rules::axis_in_range<ops::transpose, A, dim_list<D...>>::value,
                "transpose: the first axis is out of range for the tensor's dims");
  static_assert(rules::axis_in_range<ops::transpose, B, dim_list<D...>>::value,
                "transpose: the second axis is out of range for the tensor's dims");
  if constexpr (rules::axis_in_range<ops::transpose, A, dim_list<D...>>::value &&
                rules::axis_in_range<ops::transpose, B, dim_list<D...>>::value) {
    constexpr std::size_t a = detail::normalize_axis<A, sizeof...(D)>();
    constexpr std::size_t b = detail::normalize_axis<B, sizeof...(D)>();
    constexpr auto out =
        hana::unpack(hana::make_range(hana::size_c<0>, hana::size_c<sizeof...(D)>), [](auto... i) {
          constexpr auto dx = hana::tuple_t<D...>;
          return hana::make_tuple(
              hana::at_c<(decltype(i)::value == a   ? b
                          : decltype(i)::value == b ? a
                                                    : decltype(i)::value)>(dx)...);
        });
    return detail::wrap_dims<DT>(transpose(x.value(), A, B), out, "transpose");
  }
  else // the rule above failed: one error, not a cascade about the result
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
  detail::check_float<ops::scale, DT>();
  return detail::wrap<TypedValue<DT, D...>>(scale(x.value(), factor), "scale");
}

namespace detail {
/// The elementwise rule; the output dims are the longer operand's (a's when equal).
template <class Op, class A, class B> constexpr auto check_elementwise() {
  using TA = traits<A>;
  using TB = traits<B>;
  check_float<Op, typename TA::dtype>();
  check_same_dtype<Op, typename TA::dtype, typename TB::dtype>();
  using Longer = std::conditional_t<(TA::rank >= TB::rank), TA, TB>;
  using Shorter = std::conditional_t<(TA::rank >= TB::rank), TB, TA>;
  static_assert(
      rules::shorter_shape_ends_longer<Op, typename Shorter::list, typename Longer::list>::value,
      "elementwise op: shapes do not match: they must be equal, or the shorter "
      "operand's dims must be the last dims of the longer (the shorter shape and the "
      "longer are the template arguments above)");
  return Longer::types;
}
} // namespace detail

// Elementwise a + b, a - b, a * b, a / b and every other op of QKV_BROADCAST_BINARY
// (op_lists.hpp): the shorter operand's dims end the longer's.
#define QKV_TYPED_BINARY(kind, builder, bound, summary)                                        \
  template <class DA, class... A, class DB, class... B>                                        \
  auto builder(const TypedValue<DA, A...> &a, const TypedValue<DB, B...> &b) {                 \
    constexpr auto out =                                                                       \
        detail::check_elementwise<ops::builder, TypedValue<DA, A...>, TypedValue<DB, B...>>(); \
    return detail::wrap_dims<DA>(builder(a.value(), b.value()), out, #builder);                \
  }
QKV_BROADCAST_BINARY(QKV_TYPED_BINARY)
#undef QKV_TYPED_BINARY

/// x + y with exactly the same dims (a transformer's residual stream).
template <class DA, class... A, class DB, class... B>
auto residual(const TypedValue<DA, A...> &x, const TypedValue<DB, B...> &y) {
  detail::check_float<ops::residual, DA>();
  detail::check_same_dtype<ops::residual, DA, DB>();
  static_assert(rules::same_dims<ops::residual, dim_list<A...>, dim_list<B...>>::value,
                "residual: both tensors must have exactly the same dims (both shapes are the "
                "template arguments above)");
  return detail::wrap<TypedValue<DA, A...>>(residual(x.value(), y.value()), "residual");
}

/// Softmax over axis Axis, by default the last: softmax(x), softmax<-2>(x).
template <std::int64_t Axis = -1, class DT, class... D>
auto softmax(const TypedValue<DT, D...> &x) {
  detail::check_float<ops::softmax, DT>();
  static_assert(rules::axis_in_range<ops::softmax, Axis, dim_list<D...>>::value,
                "softmax: the axis is out of range for the tensor's dims");
  return detail::wrap<TypedValue<DT, D...>>(softmax(x.value(), Axis), "softmax");
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
  namespace hana = boost::hana;
  static_assert(rules::rank_at_least<ops::split_heads, 2, dim_list<D...>>::value,
                "split_heads: the tensor needs at least 2 dims (..., L, H*Dh)");
  static_assert(rules::split_heads_heads_are_static<H>::value,
                "split_heads: the heads dim must be static (qkv::dim<\"H\", 8>)");
  if constexpr (sizeof...(D) >= 2) {
    constexpr auto dx = hana::tuple_t<D...>;
    static_assert(
        rules::split_heads_last_dim_is_heads_times_head_dim<detail::dim_at<-1, decltype(dx)>, H,
                                                            Dh>::value,
        "split_heads: the tensor's last dim must be heads * head_dim: static with extent "
        "H*Dh, or named H*Dh when dynamic (the last dim, the heads and the head dim are the "
        "template arguments above)");
    constexpr auto out = hana::concat(hana::drop_back(dx, hana::size_c<2>),
                                      hana::tuple_t<H, detail::dim_at<-2, decltype(dx)>, Dh>);
    return detail::wrap_dims<DT>(split_heads(x.value(), heads, head_dim), out, "split_heads");
  }
}

namespace detail {
/// merge_heads' output dims x[:-3] + x[-2] + Out.
template <class Out, class... D> constexpr auto merged_dims() {
  constexpr auto dx = hana::tuple_t<D...>;
  return hana::append(
      hana::append(hana::drop_back(dx, hana::size_c<3>), hana::at_c<sizeof...(D) - 2>(dx)),
      hana::type_c<Out>);
}
template <class... D>
using merged_dim = decltype(dim_at<-3, decltype(hana::tuple_t<D...>)>{} *
                            dim_at<-1, decltype(hana::tuple_t<D...>)>{});
} // namespace detail

/// (..., H, L, Dh) -> (..., L, H*Dh).
template <class DT, class... D> auto merge_heads(const TypedValue<DT, D...> &x) {
  static_assert(rules::rank_at_least<ops::merge_heads, 3, dim_list<D...>>::value,
                "merge_heads: the tensor needs at least 3 dims (..., H, L, Dh)");
  if constexpr (sizeof...(D) >= 3)
    return detail::wrap_dims<DT>(merge_heads(x.value()),
                                 detail::merged_dims<detail::merged_dim<D...>, D...>(),
                                 "merge_heads");
  else // the rule above failed: one error, not a cascade about the result
    return x;
}

/// (..., H, L, Dh) -> (..., L, Out), Out having H*Dh's extent when both are static, else
/// its name.
template <class DT, class... D, class Out>
requires is_named_dim_v<Out>
auto merge_heads(const TypedValue<DT, D...> &x, Out out_dim) {
  static_assert(rules::rank_at_least<ops::merge_heads, 3, dim_list<D...>>::value,
                "merge_heads: the tensor needs at least 3 dims (..., H, L, Dh)");
  if constexpr (sizeof...(D) >= 3) {
    static_assert(
        rules::merge_heads_out_is_heads_times_head_dim<detail::merged_dim<D...>, Out>::value,
        "merge_heads: the output dim must be heads * head_dim, by static extent, or by "
        "name (H*Dh) when one is dynamic (the merged dim and the requested one are the "
        "template arguments above)");
    return detail::wrap_dims<DT>(merge_heads(x.value(), out_dim), detail::merged_dims<Out, D...>(),
                                 "merge_heads");
  }
  else // the rule above failed: one error, not a cascade about the result
    return x;
}

namespace detail {
/// concat's rules for one more part T (a tensor, or the trailing dim, which has none).
template <std::size_t Axis, class First, class T> constexpr void check_concat_part() {
  if constexpr (is_typed_value<T>) {
    check_same_dtype<ops::concat, typename traits<First>::dtype, typename traits<T>::dtype>();
    static_assert(
        rules::concat_ranks_equal<typename traits<First>::list, typename traits<T>::list>::value,
        "concat: all tensors must have the same number of dims (the first tensor's dims and "
        "another's are the template arguments above)");
    static_assert(rules::concat_dims_off_the_axis_match<Axis, typename traits<First>::list,
                                                        typename traits<T>::list>::value,
                  "concat: the tensors' dims must match except along the axis (the axis, the "
                  "first tensor's dims and another's are the template arguments above)");
  }
}
} // namespace detail

/// Joins tensors along axis Axis, by default the last: concat(a, b), concat<1>(a, b, c).
/// The joined dim is named a+b+... with the summed extent; a dim passed last names it
/// instead, concat(a, b, Dh), and must have the summed extent when both are static, else be
/// named a+b.
template <std::int64_t Axis = -1, class DT, class... D, class... Rest>
requires(sizeof...(Rest) >= 1 &&
         ((detail::is_typed_value<Rest> ||
           is_named_dim_v<Rest>)&&...)) auto concat(const TypedValue<DT, D...> &first,
                                                    const Rest &...rest) {
  namespace hana = boost::hana;
  constexpr auto rest_types = hana::tuple_t<Rest...>;
  using Last = detail::type_of<decltype(hana::back(rest_types))>;
  constexpr bool has_out = is_named_dim_v<Last>;
  static_assert((is_named_dim_v<Rest> + ... + 0) == (has_out ? 1 : 0),
                "concat: only the last argument may be a dim (the name of the joined dim)");
  static_assert(rules::axis_in_range<ops::concat, Axis, dim_list<D...>>::value,
                "concat: the axis is out of range for the tensors' dims");
  if constexpr ((is_named_dim_v<Rest> + ... + 0) == (has_out ? 1 : 0) &&
                rules::axis_in_range<ops::concat, Axis, dim_list<D...>>::value) {
    constexpr std::size_t ax = detail::normalize_axis<Axis, sizeof...(D)>();
    // The dims of every tensor: `first`, then `rest` but a trailing dim.
    constexpr auto tensors = hana::drop_back(rest_types, hana::size_c < has_out ? 1 : 0 >);
    constexpr auto parts = hana::prepend(
        hana::transform(tensors,
                        [](auto t) { return detail::traits<detail::type_of<decltype(t)>>::types; }),
        hana::tuple_t<D...>);
    (detail::check_concat_part<ax, TypedValue<DT, D...>, Rest>(), ...);
    constexpr bool ranks_ok = hana::all_of(parts, [](auto p) {
      return hana::bool_c<decltype(hana::length(p))::value == sizeof...(D)>;
    });
    if constexpr (ranks_ok) {
      // The parts' dims along the axis, summed: a+b+... (operator+ on NamedDim).
      constexpr auto sum = hana::unpack(parts, [](auto... p) {
        return (detail::dim_at<static_cast<std::int64_t>(ax), decltype(p)>{} + ...);
      });
      using Sum = std::remove_cv_t<decltype(sum)>;
      using Joined = std::conditional_t<has_out, Last, Sum>;
      if constexpr (has_out)
        static_assert(rules::concat_out_is_sum_of_parts<Sum, Last>::value,
                      "concat: the joined dim must be the sum of the parts, by static extent, or "
                      "by name (a+b) when one is dynamic (the sum and the requested dim are the "
                      "template arguments above)");
      std::vector<Value> xs{first.value()};
      auto push = [&](const auto &r) {
        if constexpr (detail::is_typed_value<std::remove_cvref_t<decltype(r)>>)
          xs.push_back(r.value());
      };
      (push(rest), ...);
      Value out;
      if constexpr (has_out)
        out = concat(xs, Axis, Last{});
      else
        out = concat(xs, Axis);
      constexpr auto dx = hana::tuple_t<D...>;
      constexpr auto dims =
          hana::concat(hana::append(hana::take_front(dx, hana::size_c<ax>), hana::type_c<Joined>),
                       hana::drop_front(dx, hana::size_c<ax + 1>));
      return detail::wrap_dims<DT>(out, dims, "concat");
    }
  }
}

/// A concat of one tensor: the same dims (the untyped layer allows it).
template <std::int64_t Axis = -1, class DT, class... D> auto concat(const TypedValue<DT, D...> &x) {
  static_assert(rules::axis_in_range<ops::concat, Axis, dim_list<D...>>::value,
                "concat: the axis is out of range for the tensor's dims");
  return detail::wrap<TypedValue<DT, D...>>(concat(std::vector<Value>{x.value()}, Axis), "concat");
}

/// Scores where the mask_mod is false become -inf. Scores: (L, S), (H, L, S), (B, H, L, S).
template <class DT, class... D, class F> auto mask(const TypedValue<DT, D...> &scores, F &&m) {
  detail::check_float<ops::mask, DT>();
  static_assert(rules::rank_2_to_4<ops::mask, dim_list<D...>>::value,
                "mask: scores must have 2 (L, S), 3 (H, L, S) or 4 (B, H, L, S) dims");
  return detail::wrap<TypedValue<DT, D...>>(mask(scores.value(), std::forward<F>(m)), "mask");
}

/// Scores -> score_mod(score, b, h, q, kv).
template <class DT, class... D, class F> auto score_mod(const TypedValue<DT, D...> &scores, F &&s) {
  detail::check_float<ops::score_mod, DT>();
  static_assert(rules::rank_2_to_4<ops::score_mod, dim_list<D...>>::value,
                "score_mod: scores must have 2 (L, S), 3 (H, L, S) or 4 (B, H, L, S) dims");
  return detail::wrap<TypedValue<DT, D...>>(score_mod(scores.value(), std::forward<F>(s)),
                                            "score_mod");
}

/// x + sinusoidal positions over x's last two axes (position, feature).
template <class DT, class... D>
auto sinusoidal_pe(const TypedValue<DT, D...> &x, double base = 10000, std::int64_t offset = 0) {
  detail::check_float<ops::sinusoidal_pe, DT>();
  static_assert(rules::rank_at_least<ops::sinusoidal_pe, 2, dim_list<D...>>::value,
                "sinusoidal_pe: the tensor needs at least 2 dims (position, feature)");
  return detail::wrap<TypedValue<DT, D...>>(sinusoidal_pe(x.value(), base, offset),
                                            "sinusoidal_pe");
}

namespace detail {
template <class DT, class... D> constexpr bool check_rope() {
  check_float<ops::rope, DT>();
  static_assert(rules::rank_at_least<ops::rope, 2, dim_list<D...>>::value,
                "rope: the tensor needs at least 2 dims (..., L, Dh)");
  if constexpr (sizeof...(D) >= 2) {
    static_assert(rules::rope_last_dim_is_static_and_even<
                      typename traits<TypedValue<DT, D...>>::template dim<-1>>::value,
                  "rope: rope rotates pairs of features, so the last dim (the template argument "
                  "above) must be static and even");
    return true;
  }
  return false;
}
} // namespace detail

/// Rotary position embedding over x's last two axes (L, Dh); Dh static and even.
template <class DT, class... D> auto rope(const TypedValue<DT, D...> &x, RopeOptions opts = {}) {
  if constexpr (detail::check_rope<DT, D...>())
    return detail::wrap<TypedValue<DT, D...>>(rope(x.value(), opts), "rope");
}

namespace detail {
template <class Op, class X, class P> constexpr void check_norm() {
  check_float<Op, typename traits<X>::dtype>();
  static_assert(rules::rank_at_least<Op, 1, typename traits<X>::list>::value,
                "layer_norm/rms_norm normalise over the last dim; the tensor needs one");
  if constexpr (!std::is_void_v<P>) {
    check_same_dtype<Op, typename traits<X>::dtype, typename traits<P>::dtype>();
    if constexpr (traits<X>::rank >= 1)
      static_assert(rules::norm_param_is_last_dim<Op, typename traits<P>::list,
                                                  typename traits<X>::template dim<-1>>::value,
                    "layer_norm/rms_norm: gamma and beta must be 1-D with the input's last dim "
                    "(the parameter's dims and that dim are the template arguments above)");
  }
}
} // namespace detail

/// rope with each row's position read from `positions`, integer, (L) or (B, L) with B
/// x's first dim and L its second-to-last; opts.offset must be 0.
template <class DT, class... D, class DP, class... P>
auto rope(const TypedValue<DT, D...> &x, const TypedValue<DP, P...> &positions,
          RopeOptions opts = {}) {
  static_assert(rules::is_integer_tensor<ops::rope, DP>::value,
                "rope: positions must be an integer tensor (i32 or i64); their dtype is the "
                "template argument above");
  static_assert(rules::rope_positions_match_rows<dim_list<P...>, dim_list<D...>>::value,
                "rope: positions must be (L) or (B, L), with L x's second-to-last dim and B its "
                "first (both shapes are the template arguments above)");
  if constexpr (detail::check_rope<DT, D...>())
    return detail::wrap<TypedValue<DT, D...>>(rope(x.value(), positions.value(), opts), "rope");
}

/// Normalises over the last axis to mean 0, variance 1.
template <class DT, class... D> auto layer_norm(const TypedValue<DT, D...> &x, double eps = 1e-5) {
  detail::check_norm<ops::layer_norm, TypedValue<DT, D...>, void>();
  return detail::wrap<TypedValue<DT, D...>>(layer_norm(x.value(), eps), "layer_norm");
}
/// layer_norm, then * gamma + beta, both (D) with D the last dim of x.
template <class DT, class... D, class DG, class... G, class DB, class... Be>
auto layer_norm(const TypedValue<DT, D...> &x, const TypedValue<DG, G...> &gamma,
                const TypedValue<DB, Be...> &beta, double eps = 1e-5) {
  detail::check_norm<ops::layer_norm, TypedValue<DT, D...>, TypedValue<DG, G...>>();
  detail::check_norm<ops::layer_norm, TypedValue<DT, D...>, TypedValue<DB, Be...>>();
  return detail::wrap<TypedValue<DT, D...>>(layer_norm(x.value(), gamma.value(), beta.value(), eps),
                                            "layer_norm");
}
/// x / sqrt(mean(x^2) + eps) over the last axis.
template <class DT, class... D> auto rms_norm(const TypedValue<DT, D...> &x, double eps = 1e-6) {
  detail::check_norm<ops::rms_norm, TypedValue<DT, D...>, void>();
  return detail::wrap<TypedValue<DT, D...>>(rms_norm(x.value(), eps), "rms_norm");
}
/// rms_norm, then * gamma (D).
template <class DT, class... D, class DG, class... G>
auto rms_norm(const TypedValue<DT, D...> &x, const TypedValue<DG, G...> &gamma, double eps = 1e-6) {
  detail::check_norm<ops::rms_norm, TypedValue<DT, D...>, TypedValue<DG, G...>>();
  return detail::wrap<TypedValue<DT, D...>>(rms_norm(x.value(), gamma.value(), eps), "rms_norm");
}

/// Exact (erf) GELU, or the tanh approximation.
template <class DT, class... D> auto gelu(const TypedValue<DT, D...> &x, bool approximate = false) {
  detail::check_float<ops::gelu, DT>();
  return detail::wrap<TypedValue<DT, D...>>(gelu(x.value(), approximate), "gelu");
}
/// x if x > 0, else alpha * (exp(x) - 1).
template <class DT, class... D> auto elu(const TypedValue<DT, D...> &x, double alpha = 1.0) {
  detail::check_float<ops::elu, DT>();
  return detail::wrap<TypedValue<DT, D...>>(elu(x.value(), alpha), "elu");
}
/// silu, softplus and every other activation of QKV_PLAIN_ACTIVATIONS (op_lists.hpp): the
/// same dims and dtype, which must be a float.
#define QKV_TYPED_ACTIVATION(kind, builder, bound, summary)                                    \
  template <class DT, class... D> auto builder(const TypedValue<DT, D...> &x) {                \
    detail::check_float<ops::builder, DT>();                                                   \
    return detail::wrap<TypedValue<DT, D...>>(builder(x.value()), #builder);                   \
  }
QKV_PLAIN_ACTIVATIONS(QKV_TYPED_ACTIVATION)
#undef QKV_TYPED_ACTIVATION

/// silu(gate) * up, both with the same dims.
template <class DA, class... A, class DB, class... B>
auto swiglu(const TypedValue<DA, A...> &gate, const TypedValue<DB, B...> &up) {
  detail::check_float<ops::swiglu, DA>();
  detail::check_same_dtype<ops::swiglu, DA, DB>();
  static_assert(rules::same_dims<ops::swiglu, dim_list<A...>, dim_list<B...>>::value,
                "swiglu: gate and up must have the same dims (both shapes are the template "
                "arguments above)");
  return detail::wrap<TypedValue<DA, A...>>(swiglu(gate.value(), up.value()), "swiglu");
}

/// table[ids]: ids (...) i32 or i64, table (V, D) -> (..., D) with the table's dtype.
template <class DI, class... I, class DT, class... T>
auto embedding(const TypedValue<DI, I...> &ids, const TypedValue<DT, T...> &table) {
  namespace hana = boost::hana;
  static_assert(rules::embedding_ids_are_integer<DI>::value,
                "embedding: the ids must be an integer tensor (i32 or i64); their dtype is the "
                "template argument above");
  detail::check_float<ops::embedding, DT>();
  static_assert(rules::rank_is<ops::embedding, 2, dim_list<T...>>::value,
                "embedding: the table must have 2 dims (vocab, features)");
  if constexpr (sizeof...(T) == 2) {
    constexpr auto out = hana::append(hana::tuple_t<I...>, hana::at_c<1>(hana::tuple_t<T...>));
    return detail::wrap_dims<DT>(embedding(ids.value(), table.value()), out, "embedding");
  }
}

/// x (..., S, D) projected along S by e (K', S) -> (..., K', D) (Linformer).
template <class DX, class... X, class DE, class... E>
auto linformer_project(const TypedValue<DX, X...> &x, const TypedValue<DE, E...> &e) {
  namespace hana = boost::hana;
  detail::check_float<ops::linformer_project, DX>();
  detail::check_same_dtype<ops::linformer_project, DX, DE>();
  static_assert(rules::rank_at_least<ops::linformer_project, 2, dim_list<X...>>::value,
                "linformer_project: the input needs at least 2 dims (..., S, D)");
  static_assert(rules::rank_is<ops::linformer_project, 2, dim_list<E...>>::value,
                "linformer_project: the projection must have 2 dims (K', S)");
  if constexpr (sizeof...(X) >= 2 && sizeof...(E) == 2) {
    constexpr auto dx = hana::tuple_t<X...>;
    constexpr auto de = hana::tuple_t<E...>;
    static_assert(
        rules::linformer_projection_ends_in_seq_dim<detail::dim_at<1, decltype(de)>,
                                                    detail::dim_at<-2, decltype(dx)>>::value,
        "linformer_project: the projection's last dim must be the input's sequence "
        "dim, its second-to-last (both dims are the template arguments above)");
    constexpr auto out = hana::append(
        hana::append(hana::drop_back(dx, hana::size_c<2>), hana::at_c<0>(de)), hana::back(dx));
    return detail::wrap_dims<DX>(linformer_project(x.value(), e.value()), out, "linformer_project");
  }
}

namespace detail {
/// The rules cache_view and paged_cache_view share: the store (B or pages, Hkv, rows, Dh),
/// lengths (B) integer, fresh (B, Hkv, n, Dh) with fresh's B, Hkv, Dh.
template <class Op, class S, class L, class F> constexpr bool check_cache_view() {
  using TS = traits<S>;
  using TL = traits<L>;
  using TF = traits<F>;
  check_float<Op, typename TS::dtype>();
  check_same_dtype<Op, typename TS::dtype, typename TF::dtype>();
  static_assert(rules::rank_is<Op, 4, typename TS::list>::value,
                "cache_view: the cache must have 4 dims (B, Hkv, C, Dh), or a paged cache's pool "
                "(pages, Hkv, page, Dh)");
  static_assert(rules::rank_is<Op, 4, typename TF::list>::value,
                "cache_view: the new rows must have 4 dims (B, Hkv, n, Dh)");
  static_assert(rules::is_integer_tensor<Op, typename TL::dtype>::value,
                "cache_view: lengths must be an integer tensor (i32 or i64)");
  static_assert(rules::rank_is<Op, 1, typename TL::list>::value,
                "cache_view: lengths must have 1 dim (B)");
  if constexpr (TS::rank == 4 && TF::rank == 4 && TL::rank == 1) {
    static_assert(rules::same_dims<
                      Op, dim_list<typename TS::template dim<1>, typename TS::template dim<3>>,
                      dim_list<typename TF::template dim<1>, typename TF::template dim<3>>>::value,
                  "cache_view: the cache and the new rows must share kv heads (dim 1) and head dim "
                  "(dim 3); both pairs are the template arguments above");
    static_assert(
        rules::same_dims<Op, typename TL::list, dim_list<typename TF::template dim<0>>>::value,
        "cache_view: lengths must be (B), the new rows' first dim (both are the template "
        "arguments above)");
    return true;
  }
  return false;
}
} // namespace detail

/// Keys or values of a KV cache read in place, then this step's rows: past (B, Hkv, C, Dh),
/// lengths (B) integer, fresh (B, Hkv, n, Dh) -> (B, Hkv, C+n, Dh).
template <class DP, class... P, class DL, class... Ls, class DF, class... F>
auto cache_view(const TypedValue<DP, P...> &past, const TypedValue<DL, Ls...> &lengths,
                const TypedValue<DF, F...> &fresh) {
  using TP = detail::traits<TypedValue<DP, P...>>;
  using TF = detail::traits<TypedValue<DF, F...>>;
  if constexpr (detail::check_cache_view<ops::cache_view, TypedValue<DP, P...>,
                                         TypedValue<DL, Ls...>, TypedValue<DF, F...>>()) {
    static_assert(rules::same_dims<ops::cache_view, dim_list<typename TP::template dim<0>>,
                                   dim_list<typename TF::template dim<0>>>::value,
                  "cache_view: the cache and the new rows must share the batch dim (both are the "
                  "template arguments above)");
    using Rows = decltype(typename TP::template dim<2>{} + typename TF::template dim<2>{});
    using Out = TypedValue<DP, typename TF::template dim<0>, typename TF::template dim<1>, Rows,
                           typename TF::template dim<3>>;
    return detail::wrap<Out>(cache_view(past.value(), lengths.value(), fresh.value()),
                             "cache_view");
  }
}

/// The same over a paged cache: pool (P, Hkv, page, Dh), table (B, M) integer -> (B, Hkv,
/// M*page+n, Dh).
template <class DP, class... P, class DT, class... T, class DL, class... Ls, class DF, class... F>
auto paged_cache_view(const TypedValue<DP, P...> &pool, const TypedValue<DT, T...> &table,
                      const TypedValue<DL, Ls...> &lengths, const TypedValue<DF, F...> &fresh) {
  using TP = detail::traits<TypedValue<DP, P...>>;
  using TT = detail::traits<TypedValue<DT, T...>>;
  using TF = detail::traits<TypedValue<DF, F...>>;
  static_assert(rules::is_integer_tensor<ops::paged_cache_view, DT>::value,
                "paged_cache_view: the block table must be an integer tensor (i32 or i64)");
  static_assert(rules::rank_is<ops::paged_cache_view, 2, typename TT::list>::value,
                "paged_cache_view: the block table must have 2 dims (B, pages per sequence)");
  if constexpr (TT::rank == 2 &&
                detail::check_cache_view<ops::paged_cache_view, TypedValue<DP, P...>,
                                         TypedValue<DL, Ls...>, TypedValue<DF, F...>>()) {
    static_assert(rules::same_dims<ops::paged_cache_view, dim_list<typename TT::template dim<0>>,
                                   dim_list<typename TF::template dim<0>>>::value,
                  "paged_cache_view: the block table's first dim must be the new rows' batch dim "
                  "(both are the template arguments above)");
    using Pages = decltype(typename TT::template dim<1>{} * typename TP::template dim<2>{});
    using Rows = decltype(Pages{} + typename TF::template dim<2>{});
    using Out = TypedValue<DP, typename TF::template dim<0>, typename TF::template dim<1>, Rows,
                           typename TF::template dim<3>>;
    return detail::wrap<Out>(
        paged_cache_view(pool.value(), table.value(), lengths.value(), fresh.value()),
        "paged_cache_view");
  }
  else // the rule above failed: one error, not a cascade about the result
    return fresh;
}

/// cache_mask over typed lengths (B), integer.
template <class DL, class... Ls> MaskFn cache_mask(const TypedValue<DL, Ls...> &lengths) {
  static_assert(rules::is_integer_tensor<ops::cache_mask, DL>::value,
                "cache_mask: lengths must be an integer tensor (i32 or i64)");
  static_assert(rules::rank_is<ops::cache_mask, 1, dim_list<Ls...>>::value,
                "cache_mask: lengths must have 1 dim (B)");
  return cache_mask(lengths.value());
}

namespace detail {
/// The rules of attention and linear_attention; the output dims q[:-1] + v[-1].
template <class Op, class Q, class K, class V> constexpr auto check_attention() {
  using TQ = traits<Q>;
  using TK = traits<K>;
  using TV = traits<V>;
  check_float<Op, typename TQ::dtype>();
  check_same_dtype<Op, typename TQ::dtype, typename TK::dtype>();
  check_same_dtype<Op, typename TQ::dtype, typename TV::dtype>();
  static_assert(rules::rank_2_to_4<Op, typename TQ::list>::value,
                "attention: q must have 2 (L, Dh), 3 (H, L, Dh) or 4 (B, H, L, Dh) dims");
  static_assert(rules::rank_2_to_4<Op, typename TK::list>::value,
                "attention: k must have 2 (S, Dh), 3 (H, S, Dh) or 4 (B, H, S, Dh) dims");
  static_assert(rules::rank_2_to_4<Op, typename TV::list>::value,
                "attention: v must have 2 (S, Dv), 3 (H, S, Dv) or 4 (B, H, S, Dv) dims");
  static_assert(rules::attention_ranks_equal<Op, TQ::rank, TK::rank, TV::rank>::value,
                "attention: q, k and v must have the same number of dims (their ranks are the "
                "template arguments above)");
  constexpr std::size_t r = TQ::rank;
  if constexpr (r >= 2 && r <= 4 && TK::rank == r && TV::rank == r) {
    static_assert(rules::attention_q_k_head_dims_match<Op, typename TQ::template dim<-1>,
                                                       typename TK::template dim<-1>>::value,
                  "attention: q and k must share the head dim, their last (q's and k's last dims "
                  "are the template arguments above)");
    static_assert(rules::attention_k_v_seq_dims_match<Op, typename TK::template dim<-2>,
                                                      typename TV::template dim<-2>>::value,
                  "attention: k and v must share the sequence dim, their second-to-last (k's and "
                  "v's are the template arguments above)");
    if constexpr (r == 4)
      static_assert(rules::attention_batch_dims_match<Op, typename TQ::template dim<0>,
                                                      typename TK::template dim<0>,
                                                      typename TV::template dim<0>>::value,
                    "attention: q, k and v must share the batch dim, their first (the three "
                    "batch dims are the template arguments above)");
    if constexpr (r >= 3) {
      using HQ = typename TQ::template dim<-3>;
      using HK = typename TK::template dim<-3>;
      static_assert(rules::attention_k_v_heads_match<Op, HK, typename TV::template dim<-3>>::value,
                    "attention: k and v must have the same heads dim (both are the template "
                    "arguments above)");
      static_assert(rules::attention_grouped_heads_are_static<Op, HQ, HK>::value,
                    "attention: q and k have different heads dims; grouped-query attention needs "
                    "both head counts static (q's and k's heads are the template arguments "
                    "above)");
      static_assert(rules::attention_query_heads_are_a_multiple_of_kv_heads<Op, HQ, HK>::value,
                    "attention: grouped-query attention needs a whole number of query heads per "
                    "kv head (q's and k's heads are the template arguments above)");
    }
    return hana::append(hana::drop_back(TQ::types, hana::size_c<1>), hana::back(TV::types));
  } else {
    return failed{};
  }
}
} // namespace detail

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
    static_assert(std::is_same_v<DT, f32> || std::is_same_v<DT, f64>,
                  "attention_lse: the log-sum-exp is computed for f32 and f64 attention only");
    constexpr auto rows = boost::hana::drop_back(boost::hana::tuple_t<Dims...>);
    return detail::wrap_dims<DT>(Attention(this->value()).lse(), rows, "attention_lse");
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
  constexpr auto out = detail::check_attention<ops::attention, TypedValue<DQ, Q...>,
                                               TypedValue<DK, K...>, TypedValue<DV, V...>>();
  if constexpr (detail::ok<decltype(out)>)
    return detail::wrap_dims<TypedAttention, DQ>(attention(q.value(), k.value(), v.value()).value(),
                                                 out, "attention");
  else // the rule above failed: one error, not a cascade about the result
    return detail::typed_access::make<TypedAttention<DQ, Q...>>(q.value());
}

/// Two partial attentions merged by their log-sum-exps (merge_attention in graph.hpp):
/// oa, ob (..., H, L, Dv) with the same dims, la, lb their dims without Dv.
template <class DT, class... O, class DL, class... L, class... O2, class... L2>
auto merge_attention(const TypedValue<DT, O...> &oa, const TypedValue<DL, L...> &la,
                     const TypedValue<DT, O2...> &ob, const TypedValue<DL, L2...> &lb) {
  detail::check_float<ops::merge_attention, DT>();
  detail::check_same_dtype<ops::merge_attention, DT, DL>();
  static_assert(rules::same_dims<ops::merge_attention, dim_list<O...>, dim_list<O2...>>::value,
                "merge_attention: the partial outputs oa and ob must have the same dims");
  static_assert(rules::same_dims<ops::merge_attention, dim_list<L...>, dim_list<L2...>>::value,
                "merge_attention: the log-sum-exps la and lb must have the same dims");
  using rows = detail::list_t<decltype(boost::hana::drop_back(boost::hana::tuple_t<O...>))>;
  static_assert(rules::same_dims<ops::merge_attention, rows, dim_list<L...>>::value,
                "merge_attention: the log-sum-exps must have the outputs' dims without the last");
  return detail::wrap<TypedValue<DT, O...>>(
      merge_attention(oa.value(), la.value(), ob.value(), lb.value()), "merge_attention");
}

/// log(e^la + e^lb) (merge_lse in graph.hpp).
template <class DT, class... L, class... L2>
auto merge_lse(const TypedValue<DT, L...> &la, const TypedValue<DT, L2...> &lb) {
  detail::check_float<ops::merge_lse, DT>();
  static_assert(rules::same_dims<ops::merge_lse, dim_list<L...>, dim_list<L2...>>::value,
                "merge_lse: la and lb must have the same dims");
  return detail::wrap<TypedValue<DT, L...>>(merge_lse(la.value(), lb.value()), "merge_lse");
}

/// phi(q) (phi(k)^T v), normalised; the shape rules of attention.
template <class DQ, class... Q, class DK, class... K, class DV, class... V>
auto linear_attention(const TypedValue<DQ, Q...> &q, const TypedValue<DK, K...> &k,
                      const TypedValue<DV, V...> &v, FeatureMap phi = FeatureMap::EluPlusOne) {
  constexpr auto out = detail::check_attention<ops::linear_attention, TypedValue<DQ, Q...>,
                                               TypedValue<DK, K...>, TypedValue<DV, V...>>();
  if constexpr (detail::ok<decltype(out)>)
    return detail::wrap_dims<DQ>(linear_attention(q.value(), k.value(), v.value(), phi), out,
                                 "linear_attention");
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
