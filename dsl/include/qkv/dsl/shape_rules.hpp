// The ops' shape rules, written once as constexpr functions over light views of dims.
//
// Each rule takes its operands as TensorViews (a dtype and dims, each a name and an
// extent) and returns a Verdict: the first rule the operands break, naming the operands
// and dims involved, or where each dim of the result comes from. Three callers share them:
//   - the typed front end (typed.hpp) at compile time, over its dims' names and extents:
//     a broken rule is a static_assert naming the Rule and the dims;
//   - infer_type (dsl/lib/op_table.cpp) at run time, over a graph's nodes: a broken rule
//     is a qkv::Error whose message names the user's tensors and dims;
//   - the MLIR dialect's verifier through infer_unnamed, where a `?` dim is unknown and
//     equal to any.
// The rules check what the dims and dtypes decide. What depends on values the typed layer
// does not have at compile time (an eps, a base, a mod's expression) is checked where the
// values are, in op_table.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

#include <qkv/dsl/dtype.hpp>

namespace qkv::shape {

inline constexpr std::int64_t kDynamicExtent = -1; // = qkv::kDynamic
/// The most dims a rule's result may have (operands with more are refused).
inline constexpr int kMaxRank = 16;

/// A dim as the rules see it: its name and extent (kDynamicExtent when bound at run time),
/// or unknown (the dialect's `?`), which equals any dim.
struct DimView {
  std::string_view name;
  std::int64_t extent = kDynamicExtent;
  bool unknown = false;
  constexpr bool is_static() const { return !unknown && extent != kDynamicExtent; }
};

struct TensorView {
  DType dtype = DType::F32;
  std::span<const DimView> dims;
  constexpr int rank() const { return static_cast<int>(dims.size()); }
  /// The i-th dim, counted from the back when i < 0.
  constexpr const DimView &at(int i) const {
    return dims[static_cast<std::size_t>(i < 0 ? i + rank() : i)];
  }
};

/// Every rule, by what must hold. A Verdict names the first one broken.
enum class Rule : std::uint8_t {
  holds, // nothing broken
  is_float_tensor,
  is_integer_tensor,
  same_dtype,
  rank_at_most_max,
  // the rules of one tensor's rank (is_rank_rule: a message that words a broken one adds
  // the tensor's rank)
  rank_at_least_1,
  rank_at_least_2,
  rank_at_least_3,
  rank_is_1,
  rank_is_2,
  rank_is_4,
  rank_2_to_4,
  ranks_equal,
  axis_in_range,
  same_dims,
  matmul_contraction_dims_match,
  matmul_batch_dims_match,
  linear_input_dim_is_weight_first_dim,
  linear_bias_is_weight_out_dim,
  shorter_shape_ends_longer,
  split_heads_heads_are_static,
  split_heads_last_dim_is_heads_times_head_dim,
  merge_heads_out_is_heads_times_head_dim,
  concat_dims_off_the_axis_match,
  concat_out_is_sum_of_parts,
  rope_last_dim_is_static_and_even,
  rope_positions_match_rows,
  norm_param_is_last_dim,
  linformer_projection_ends_in_seq_dim,
  attention_q_k_head_dims_match,
  attention_k_v_seq_dims_match,
  attention_batch_dims_match,
  attention_heads_are_not_zero,
  attention_k_v_heads_match,
  attention_grouped_heads_are_static,
  attention_query_heads_are_a_multiple_of_kv_heads,
  cache_heads_and_head_dim_match,
  cache_lengths_are_batch,
  cache_batch_dims_match,
  paged_cache_table_is_batch,
  lse_attention_is_f32_or_f64,
  merge_outputs_dims_match,
  merge_lse_is_output_rows,
  last = merge_lse_is_output_rows,
};

constexpr std::string_view op_summary(Rule r);

/// Whether `r` is a rule of one tensor's number of dims (the run-time message of a broken
/// one says how many the tensor has).
constexpr bool is_rank_rule(Rule r) {
  switch (r) {
  case Rule::rank_at_least_1:
  case Rule::rank_at_least_2:
  case Rule::rank_at_least_3:
  case Rule::rank_is_1:
  case Rule::rank_is_2:
  case Rule::rank_is_4:
  case Rule::rank_2_to_4: return true;
  default: return false;
  }
}

/// One sentence per rule: the typed layer's static_assert message where the compiler
/// takes a computed one, and, for a rule without words of its op's own, the start of the
/// run-time message.
constexpr std::string_view summary(Rule r) {
  switch (r) {
  case Rule::holds: return "";
  case Rule::is_float_tensor: return "this op needs float tensors (f32, f64, f16 or bf16)";
  case Rule::is_integer_tensor: return "this operand must be an integer tensor (i32 or i64)";
  case Rule::same_dtype: return "the tensors of this op must have the same dtype";
  case Rule::rank_at_most_max:
    return "a tensor has more dims than qkv's ops take (16 in the result)";
  case Rule::rank_at_least_1: return "the tensor needs at least one dim";
  case Rule::rank_at_least_2: return "the tensor needs at least 2 dims";
  case Rule::rank_at_least_3: return "the tensor needs at least 3 dims (..., H, L, Dh)";
  case Rule::rank_is_1: return "the tensor must have 1 dim";
  case Rule::rank_is_2: return "the tensor must have 2 dims";
  case Rule::rank_is_4: return "the tensor must have 4 dims";
  case Rule::rank_2_to_4:
    return "the tensor must have 2 (L, S), 3 (H, L, S) or 4 (B, H, L, S) dims";
  case Rule::ranks_equal: return "the tensors must have the same number of dims";
  case Rule::axis_in_range: return "the axis is out of range for the tensor's dims";
  case Rule::same_dims: return "the tensors must have exactly the same dims";
  default: return op_summary(r);
  }
}

/// The sentences of the rules of one op (or family).
constexpr std::string_view op_summary(Rule r) {
  switch (r) {
  case Rule::matmul_contraction_dims_match:
    return "matmul: contraction dims differ: the left operand's last dim must be the right "
           "operand's second-to-last";
  case Rule::matmul_batch_dims_match:
    return "matmul: batch dims differ: the dims before the last two must be equal, or one side "
           "must be 2-D";
  case Rule::linear_input_dim_is_weight_first_dim:
    return "linear: the input's last dim must be the weight's first dim";
  case Rule::linear_bias_is_weight_out_dim:
    return "linear: the bias must be 1-D with the weight's output dim";
  case Rule::shorter_shape_ends_longer:
    return "elementwise op: shapes do not match: they must be equal, or the shorter operand's "
           "dims must be the last dims of the longer";
  case Rule::split_heads_heads_are_static:
    return "split_heads: the heads dim must be static and positive (qkv::dim<\"H\", 8>)";
  case Rule::split_heads_last_dim_is_heads_times_head_dim:
    return "split_heads: the tensor's last dim must be heads * head_dim: static with extent "
           "H*Dh, or named H*Dh when dynamic";
  case Rule::merge_heads_out_is_heads_times_head_dim:
    return "merge_heads: the output dim must be heads * head_dim, by static extent, or by name "
           "(H*Dh) when one is dynamic";
  case Rule::concat_dims_off_the_axis_match:
    return "concat: the tensors' dims must match except along the axis";
  case Rule::concat_out_is_sum_of_parts:
    return "concat: the joined dim must be the sum of the parts, by static extent, or by name "
           "(a+b) when one is dynamic";
  case Rule::rope_last_dim_is_static_and_even:
    return "rope: rope rotates pairs of features, so the last dim must be static and even";
  case Rule::rope_positions_match_rows:
    return "rope: positions must be (L) or (B, L), with L x's second-to-last dim and B its first";
  case Rule::norm_param_is_last_dim:
    return "layer_norm/rms_norm: gamma and beta must be 1-D with the input's last dim";
  case Rule::linformer_projection_ends_in_seq_dim:
    return "linformer_project: the projection's last dim must be the input's sequence dim, its "
           "second-to-last";
  case Rule::attention_q_k_head_dims_match:
    return "attention: q and k must share the head dim, their last";
  case Rule::attention_k_v_seq_dims_match:
    return "attention: k and v must share the sequence dim, their second-to-last";
  case Rule::attention_batch_dims_match:
    return "attention: q, k and v must share the batch dim, their first";
  case Rule::attention_heads_are_not_zero: return "attention: query and kv heads must not be 0";
  case Rule::attention_k_v_heads_match: return "attention: k and v must have the same heads dim";
  case Rule::attention_grouped_heads_are_static:
    return "attention: q and k have different heads dims; grouped-query attention needs both "
           "head counts static";
  case Rule::attention_query_heads_are_a_multiple_of_kv_heads:
    return "attention: grouped-query attention needs a whole number of query heads per kv head";
  case Rule::cache_heads_and_head_dim_match:
    return "cache_view: the cache and the new rows must share kv heads (dim 1) and head dim "
           "(dim 3)";
  case Rule::cache_lengths_are_batch:
    return "cache_view: lengths must be an integer (B), the new rows' first dim";
  case Rule::cache_batch_dims_match:
    return "cache_view: the cache and the new rows must share the batch dim";
  case Rule::paged_cache_table_is_batch:
    return "paged_cache_view: the block table must be an integer (B, pages per sequence)";
  case Rule::lse_attention_is_f32_or_f64:
    return "attention_lse: the log-sum-exp is computed for f32 and f64 attention only";
  case Rule::merge_outputs_dims_match:
    return "merge_attention: the partial outputs oa and ob must have the same dims";
  case Rule::merge_lse_is_output_rows:
    return "merge_attention: the log-sum-exps must have the outputs' dims without the last";
  default:
    return ""; // a shared rule's (summary), or a rule without a sentence (a test
               // checks that every rule has one)
  }
}

/// Where a dim of the result comes from: an operand's dim, a dim the op was given (split
/// heads' H and Dh, the out dim of merge_heads and concat), or the product or sum of
/// operands' dims, named as qkv::product() and qkv::sum() name them.
struct DimSource {
  enum Kind : std::uint8_t {
    Operand,     // op's dim
    Given,       // given dim number `dim`
    Product,     // op.dim * op2.dim2
    Sum,         // op.dim + op2.dim2
    SumAll,      // every operand's dim `dim`, summed (concat)
    ProductPlus, // op.dim * op2.dim2 + op3.dim3 (a paged cache's rows)
  };
  Kind kind = Operand;
  std::int8_t op = 0, dim = 0, op2 = 0, dim2 = 0, op3 = 0, dim3 = 0;
};

/// Operands a Verdict names from kGiven on are the op's given dims, not tensors.
inline constexpr std::int8_t kGiven = 100;

struct Verdict {
  Rule broken = Rule::holds;
  std::int8_t a = -1, b = -1;   // the operands the broken rule is about (-1: none)
  std::int8_t da = -1, db = -1; // and their dims (-1: the operand as a whole)
  std::int8_t dtype_of = 0;     // the operand whose dtype the result has
  std::int8_t rank = 0;
  std::array<DimSource, kMaxRank> dims{};

  constexpr bool ok() const { return broken == Rule::holds; }
  constexpr void push(DimSource s) { dims[static_cast<std::size_t>(rank++)] = s; }
  constexpr void push_dim(int op, int dim) {
    push({DimSource::Operand, static_cast<std::int8_t>(op), static_cast<std::int8_t>(dim)});
  }
  /// Operand op's dims [from, to).
  constexpr void push_dims(int op, int from, int to) {
    for (int i = from; i < to; ++i)
      push_dim(op, i);
  }
};

/// The verdict of a broken rule.
constexpr Verdict broken(Rule r, int a = -1, int b = -1, int da = -1, int db = -1) {
  Verdict v;
  v.broken = r;
  v.a = static_cast<std::int8_t>(a);
  v.b = static_cast<std::int8_t>(b);
  v.da = static_cast<std::int8_t>(da);
  v.db = static_cast<std::int8_t>(db);
  return v;
}

// ---- what the rules compare ------------------------------------------------------------

/// Two dims are the same when name and extent are (a graph keeps one extent per name); an
/// unknown dim is the same as any.
constexpr bool same(const DimView &a, const DimView &b) {
  return a.unknown || b.unknown || (a.name == b.name && a.extent == b.extent);
}

/// a's dims [af, af + n) are b's [bf, bf + n).
constexpr bool same_run(const TensorView &a, int af, const TensorView &b, int bf, int n) {
  for (int i = 0; i < n; ++i)
    if (!same(a.dims[static_cast<std::size_t>(af + i)], b.dims[static_cast<std::size_t>(bf + i)]))
      return false;
  return true;
}
constexpr bool same_dims(const TensorView &a, const TensorView &b) {
  return a.rank() == b.rank() && same_run(a, 0, b, 0, a.rank());
}

constexpr bool has_plus(std::string_view s) { return s.find('+') != std::string_view::npos; }

/// Whether `s` starts with `part`; if so, takes it off.
constexpr bool eat(std::string_view &s, std::string_view part) {
  if (!s.starts_with(part))
    return false;
  s.remove_prefix(part.size());
  return true;
}

// How derived dims are named, written once: qkv::product() and qkv::sum() (graph.cpp), the
// typed layer's product and sum dims (typed.hpp) and the rules below, which recognise such
// a name, all spell through these. A factor that is a sum is parenthesised ("(A+B)*C");
// sums are joined flat ("H*Dh+X").

/// Calls put(piece) for each piece of a*b's name, in order.
template <class Put> constexpr void spell_product(std::string_view a, std::string_view b, Put put) {
  put(has_plus(a) ? "(" : "");
  put(a);
  put(has_plus(a) ? ")*" : "*");
  put(has_plus(b) ? "(" : "");
  put(b);
  put(has_plus(b) ? ")" : "");
}

/// Calls put(piece) for each piece of the name of the sum of `n` parts, part(i) the i-th
/// part's name.
template <class Part, class Put> constexpr void spell_sum(std::size_t n, Part part, Put put) {
  for (std::size_t i = 0; i < n; ++i) {
    put(i ? "+" : "");
    put(std::string_view(part(i)));
  }
}

/// The length of the name spell_product or spell_sum spells.
template <class Spell> constexpr std::size_t spelled_size(Spell spell) {
  std::size_t n = 0;
  spell([&](std::string_view piece) { n += piece.size(); });
  return n;
}

/// Whether the pieces spell(put) puts are, in order, exactly `name`.
template <class Spell> constexpr bool spells(std::string_view name, Spell spell) {
  bool ok = true;
  spell([&](std::string_view piece) { ok = ok && eat(name, piece); });
  return ok && name.empty();
}

/// Whether `name` is the name qkv::product() gives a*b.
constexpr bool is_product_name(std::string_view name, std::string_view a, std::string_view b) {
  return spells(name, [&](auto put) { spell_product(a, b, put); });
}

/// A derived dim (a*b) matches a dim by static extent when both are static, else by name:
/// a dim named H*Dh whose extent is not the product does not split into these parts. An
/// unknown dim matches any; a product past 64 bits none.
constexpr bool product_matches(const DimView &a, const DimView &b, const DimView &d) {
  if (a.unknown || b.unknown || d.unknown)
    return true;
  if (a.is_static() && b.is_static() && d.is_static()) {
    std::int64_t e = 0;
    return !__builtin_mul_overflow(a.extent, b.extent, &e) && e == d.extent;
  }
  return is_product_name(d.name, a.name, b.name);
}

/// The same for the sum of the operands' dims `axis` (concat): by extent when every part
/// and d are static, else by the name qkv::sum() gives, "a+b+...".
constexpr bool sum_matches(std::span<const TensorView> in, int axis, const DimView &d) {
  bool all_static = d.is_static();
  std::int64_t e = 0;
  for (const TensorView &t : in) {
    const DimView &p = t.at(axis);
    if (p.unknown || d.unknown)
      return true;
    all_static = all_static && p.is_static() && !__builtin_add_overflow(e, p.extent, &e);
  }
  if (all_static)
    return e == d.extent;
  return spells(d.name, [&](auto put) {
    spell_sum(
        in.size(), [&](std::size_t i) { return in[i].at(axis).name; }, put);
  });
}

// ---- the rules --------------------------------------------------------------------------

/// No operand has more dims than a result may (`grow`: dims the op adds).
constexpr bool too_many_dims(std::span<const TensorView> in, int grow, Verdict &v) {
  for (std::size_t i = 0; i < in.size(); ++i)
    if (in[i].rank() + grow > kMaxRank) {
      v = broken(Rule::rank_at_most_max, static_cast<int>(i));
      return true;
    }
  return false;
}

/// Operand i is a float tensor and operand j (if any) has its dtype.
constexpr bool float_and_same(std::span<const TensorView> in, int i, int j, Verdict &v) {
  if (!is_float(in[static_cast<std::size_t>(i)].dtype)) {
    v = broken(Rule::is_float_tensor, i);
    return false;
  }
  if (j >= 0 && in[static_cast<std::size_t>(j)].dtype != in[static_cast<std::size_t>(i)].dtype) {
    v = broken(Rule::same_dtype, i, j);
    return false;
  }
  return true;
}

/// (..., M, K) x (..., K, N) -> (..., M, N); a 2-D side takes the other's batch dims.
constexpr Verdict matmul(std::span<const TensorView> in) {
  Verdict v;
  if (too_many_dims(in, 0, v) || !float_and_same(in, 0, 1, v))
    return v;
  const TensorView &a = in[0], &b = in[1];
  for (int i = 0; i < 2; ++i)
    if (in[static_cast<std::size_t>(i)].rank() < 2)
      return broken(Rule::rank_at_least_2, i);
  if (!same(a.at(-1), b.at(-2)))
    return broken(Rule::matmul_contraction_dims_match, 0, 1, a.rank() - 1, b.rank() - 2);
  int na = a.rank() - 2, nb = b.rank() - 2;
  if (na > 0 && nb > 0 && (na != nb || !same_run(a, 0, b, 0, na)))
    return broken(Rule::matmul_batch_dims_match, 0, 1);
  if (na > 0)
    v.push_dims(0, 0, na);
  else
    v.push_dims(1, 0, nb);
  v.push_dim(0, a.rank() - 2);
  v.push_dim(1, b.rank() - 1);
  return v;
}

/// x (..., K) . w (K, N) [+ bias (N)] -> (..., N).
constexpr Verdict linear(std::span<const TensorView> in) {
  Verdict v;
  if (too_many_dims(in, 0, v) || !float_and_same(in, 0, 1, v))
    return v;
  const TensorView &x = in[0], &w = in[1];
  if (x.rank() < 1)
    return broken(Rule::rank_at_least_1, 0);
  if (w.rank() != 2)
    return broken(Rule::rank_is_2, 1);
  if (!same(x.at(-1), w.at(0)))
    return broken(Rule::linear_input_dim_is_weight_first_dim, 0, 1, x.rank() - 1, 0);
  if (in.size() == 3) {
    if (!float_and_same(in, 0, 2, v))
      return v;
    if (in[2].rank() != 1 || !same(in[2].at(0), w.at(1)))
      return broken(Rule::linear_bias_is_weight_out_dim, 2, 1, -1, 1);
  }
  v.push_dims(0, 0, x.rank() - 1);
  v.push_dim(1, 1);
  return v;
}

/// An axis in [-rank, rank), made non-negative; -1 when out of range.
constexpr int normalize_axis(std::int64_t axis, int rank) {
  std::int64_t a = axis < 0 ? axis + rank : axis;
  return a < 0 || a >= rank ? -1 : static_cast<int>(a);
}

/// Swaps axes a and b.
constexpr Verdict transpose(std::span<const TensorView> in, std::int64_t axis_a,
                            std::int64_t axis_b) {
  Verdict v;
  if (too_many_dims(in, 0, v) || !float_and_same(in, 0, -1, v))
    return v;
  int r = in[0].rank(), a = normalize_axis(axis_a, r), b = normalize_axis(axis_b, r);
  if (a < 0 || b < 0)
    return broken(Rule::axis_in_range, 0, -1, a < 0 ? 0 : 1);
  for (int i = 0; i < r; ++i)
    v.push_dim(0, i == a ? b : i == b ? a : i);
  return v;
}

/// The operand's dims unchanged: elementwise ops of one tensor (scale, activations).
constexpr Verdict same_shape(std::span<const TensorView> in) {
  Verdict v;
  if (too_many_dims(in, 0, v) || !float_and_same(in, 0, -1, v))
    return v;
  v.push_dims(0, 0, in[0].rank());
  return v;
}

constexpr Verdict softmax(std::span<const TensorView> in, std::int64_t axis) {
  Verdict v = same_shape(in);
  if (v.ok() && normalize_axis(axis, in[0].rank()) < 0)
    return broken(Rule::axis_in_range, 0, -1, 0);
  return v;
}

/// Elementwise ops whose operand needs `rank` dims: sinusoidal_pe (2: position, feature),
/// the norms without parameters (1).
constexpr Verdict same_shape_rank(std::span<const TensorView> in, int rank) {
  Verdict v = same_shape(in);
  if (v.ok() && in[0].rank() < rank)
    return broken(rank == 1 ? Rule::rank_at_least_1 : Rule::rank_at_least_2, 0);
  return v;
}

/// mask, score_mod: scores (L, S), (H, L, S) or (B, H, L, S).
constexpr Verdict scores(std::span<const TensorView> in) {
  Verdict v = same_shape(in);
  if (v.ok() && (in[0].rank() < 2 || in[0].rank() > 4))
    return broken(Rule::rank_2_to_4, 0);
  return v;
}

/// add, sub, mul, div: the shorter operand's dims end the longer's; the result has the
/// longer's dims (a's when equal).
constexpr Verdict broadcast(std::span<const TensorView> in) {
  Verdict v;
  if (too_many_dims(in, 0, v) || !float_and_same(in, 0, 1, v))
    return v;
  int lng = in[0].rank() >= in[1].rank() ? 0 : 1, sht = 1 - lng;
  const TensorView &l = in[static_cast<std::size_t>(lng)], &s = in[static_cast<std::size_t>(sht)];
  if (!same_run(l, l.rank() - s.rank(), s, 0, s.rank()))
    return broken(Rule::shorter_shape_ends_longer, sht, lng);
  v.push_dims(lng, 0, l.rank());
  return v;
}

/// Two tensors of one float dtype and the same dims: swiglu, merge_lse, residual.
constexpr Verdict same_two(std::span<const TensorView> in) {
  Verdict v;
  if (too_many_dims(in, 0, v) || !float_and_same(in, 0, 1, v))
    return v;
  if (!same_dims(in[0], in[1]))
    return broken(Rule::same_dims, 0, 1);
  v.push_dims(0, 0, in[0].rank());
  return v;
}

/// (..., L, H*Dh) -> (..., H, L, Dh); given: H, Dh.
constexpr Verdict split_heads(std::span<const TensorView> in, std::span<const DimView> given) {
  Verdict v;
  if (too_many_dims(in, 1, v) || !float_and_same(in, 0, -1, v))
    return v;
  const TensorView &x = in[0];
  if (x.rank() < 2)
    return broken(Rule::rank_at_least_2, 0);
  const DimView &h = given[0], &dh = given[1];
  if (!h.unknown && (!h.is_static() || h.extent < 1))
    return broken(Rule::split_heads_heads_are_static, kGiven);
  if (!product_matches(h, dh, x.at(-1)))
    return broken(Rule::split_heads_last_dim_is_heads_times_head_dim, 0, kGiven, x.rank() - 1);
  v.push_dims(0, 0, x.rank() - 2);
  v.push({DimSource::Given, 0, 0});
  v.push_dim(0, x.rank() - 2);
  v.push({DimSource::Given, 0, 1});
  return v;
}

/// (..., H, L, Dh) -> (..., L, H*Dh), or (..., L, out) with `given` = {out}.
constexpr Verdict merge_heads(std::span<const TensorView> in, std::span<const DimView> given) {
  Verdict v;
  if (too_many_dims(in, 0, v) || !float_and_same(in, 0, -1, v))
    return v;
  const TensorView &x = in[0];
  int r = x.rank();
  if (r < 3)
    return broken(Rule::rank_at_least_3, 0);
  if (!given.empty() && !product_matches(x.at(-3), x.at(-1), given[0]))
    return broken(Rule::merge_heads_out_is_heads_times_head_dim, 0, kGiven);
  v.push_dims(0, 0, r - 3);
  v.push_dim(0, r - 2);
  auto r3 = static_cast<std::int8_t>(r - 3), r1 = static_cast<std::int8_t>(r - 1);
  v.push(given.empty() ? DimSource{DimSource::Product, 0, r3, 0, r1} : DimSource{DimSource::Given});
  return v;
}

/// Tensors joined along `axis`; given: the joined dim's name, or nothing (a+b+...).
constexpr Verdict concat(std::span<const TensorView> in, std::int64_t axis,
                         std::span<const DimView> given) {
  Verdict v;
  if (too_many_dims(in, 0, v) || !float_and_same(in, 0, -1, v))
    return v;
  const TensorView &first = in[0];
  int ax = normalize_axis(axis, first.rank());
  if (ax < 0)
    return broken(Rule::axis_in_range, 0, -1, 0);
  for (std::size_t i = 1; i < in.size(); ++i) {
    int n = static_cast<int>(i);
    if (!float_and_same(in, 0, n, v))
      return v;
    if (in[i].rank() != first.rank())
      return broken(Rule::ranks_equal, 0, n);
    for (int d = 0; d < first.rank(); ++d)
      if (d != ax && !same(first.at(d), in[i].at(d)))
        return broken(Rule::concat_dims_off_the_axis_match, 0, n, d, d);
  }
  if (!given.empty() && !sum_matches(in, ax, given[0]))
    return broken(Rule::concat_out_is_sum_of_parts, 0, kGiven, ax);
  for (int d = 0; d < first.rank(); ++d)
    if (d != ax)
      v.push_dim(0, d);
    else
      v.push(given.empty() ? DimSource{DimSource::SumAll, 0, static_cast<std::int8_t>(ax)}
                           : DimSource{DimSource::Given});
  return v;
}

/// rope: x (..., L, Dh), Dh static and even; positions (optional) integer (L) or (B, L).
constexpr Verdict rope(std::span<const TensorView> in) {
  Verdict v = same_shape_rank(in.first(1), 2);
  if (!v.ok())
    return v;
  const TensorView &x = in[0];
  if (!x.at(-1).is_static() || x.at(-1).extent % 2 != 0)
    return broken(Rule::rope_last_dim_is_static_and_even, 0, -1, x.rank() - 1);
  if (in.size() == 2) {
    const TensorView &p = in[1];
    if (!is_int(p.dtype))
      return broken(Rule::is_integer_tensor, 1);
    const DimView &l = x.at(-2);
    bool fits = (p.rank() == 1 && same(p.at(0), l)) ||
                (p.rank() == 2 && x.rank() >= 3 && same(p.at(0), x.at(0)) && same(p.at(1), l));
    if (!fits)
      return broken(Rule::rope_positions_match_rows, 1, 0);
  }
  return v;
}

/// layer_norm (x, gamma, beta), rms_norm (x, gamma): over the last dim; the parameters
/// are (D), D x's last dim.
constexpr Verdict norm(std::span<const TensorView> in) {
  Verdict v = same_shape_rank(in.first(1), 1);
  if (!v.ok())
    return v;
  for (std::size_t i = 1; i < in.size(); ++i) {
    int n = static_cast<int>(i);
    if (!float_and_same(in, 0, n, v))
      return v;
    if (in[i].rank() != 1 || !same(in[i].at(0), in[0].at(-1)))
      return broken(Rule::norm_param_is_last_dim, n, 0, -1, in[0].rank() - 1);
  }
  return v;
}

/// embedding: ids (...) integer, table (V, D) float -> (..., D) with the table's dtype.
constexpr Verdict embedding(std::span<const TensorView> in) {
  Verdict v;
  if (too_many_dims(in, 1, v))
    return v;
  if (!is_int(in[0].dtype))
    return broken(Rule::is_integer_tensor, 0);
  if (!float_and_same(in, 1, -1, v))
    return v;
  if (in[1].rank() != 2)
    return broken(Rule::rank_is_2, 1);
  v.push_dims(0, 0, in[0].rank());
  v.push_dim(1, 1);
  v.dtype_of = 1;
  return v;
}

/// linformer_project: x (..., S, D), e (K', S) -> (..., K', D).
constexpr Verdict linformer(std::span<const TensorView> in) {
  Verdict v;
  if (too_many_dims(in, 0, v) || !float_and_same(in, 0, 1, v))
    return v;
  const TensorView &x = in[0], &e = in[1];
  if (x.rank() < 2)
    return broken(Rule::rank_at_least_2, 0);
  if (e.rank() != 2)
    return broken(Rule::rank_is_2, 1);
  if (!same(e.at(1), x.at(-2)))
    return broken(Rule::linformer_projection_ends_in_seq_dim, 1, 0, 1, x.rank() - 2);
  v.push_dims(0, 0, x.rank() - 2);
  v.push_dim(1, 0);
  v.push_dim(0, x.rank() - 1);
  return v;
}

/// The heads of q and k, (..., H, L, Dh): equal, or both static with Hq a multiple of Hkv
/// (grouped-query attention). A `?` against a count is not taken as equal here: it may
/// be a grouped-query attention, which needs both static.
constexpr Verdict attention_heads(const TensorView &q, const TensorView &k, const TensorView &vt) {
  int r = q.rank();
  const DimView &hq = q.at(-3), &hk = k.at(-3);
  if (hq.extent == 0 || hk.extent == 0) // only the dialect's tensors have empty dims
    return broken(Rule::attention_heads_are_not_zero, 0, 1, r - 3, r - 3);
  if (!same(hk, vt.at(-3)))
    return broken(Rule::attention_k_v_heads_match, 1, 2, r - 3, r - 3);
  if (!same(hq, hk) || hq.unknown != hk.unknown) {
    if (!hq.is_static() || !hk.is_static())
      return broken(Rule::attention_grouped_heads_are_static, 0, 1, r - 3, r - 3);
    if (hq.extent % hk.extent != 0)
      return broken(Rule::attention_query_heads_are_a_multiple_of_kv_heads, 0, 1, r - 3, r - 3);
  }
  return {};
}

/// attention, linear_attention: q (..., Hq, L, Dh), k (..., Hkv, S, Dh), v (..., Hkv, S,
/// Dv), each of 2 to 4 dims -> (..., Hq, L, Dv).
constexpr Verdict attention(std::span<const TensorView> in) {
  Verdict v;
  if (too_many_dims(in.first(3), 0, v))
    return v;
  for (int i = 0; i < 3; ++i) {
    if (!float_and_same(in, i, -1, v))
      return v;
    int r = in[static_cast<std::size_t>(i)].rank();
    if (r < 2 || r > 4)
      return broken(Rule::rank_2_to_4, i);
  }
  if (!float_and_same(in, 0, 1, v) || !float_and_same(in, 0, 2, v))
    return v;
  const TensorView &q = in[0], &k = in[1], &vt = in[2];
  int r = q.rank();
  if (k.rank() != r || vt.rank() != r)
    return broken(Rule::ranks_equal, 0, k.rank() != r ? 1 : 2);
  if (!same(q.at(-1), k.at(-1)))
    return broken(Rule::attention_q_k_head_dims_match, 0, 1, r - 1, r - 1);
  if (!same(k.at(-2), vt.at(-2)))
    return broken(Rule::attention_k_v_seq_dims_match, 1, 2, r - 2, r - 2);
  if (r == 4 && (!same(q.at(0), k.at(0)) || !same(q.at(0), vt.at(0))))
    return broken(Rule::attention_batch_dims_match, 0, same(q.at(0), k.at(0)) ? 2 : 1, 0, 0);
  if (r >= 3 && !(v = attention_heads(q, k, vt)).ok())
    return v;
  v.push_dims(0, 0, r - 1);
  v.push_dim(2, r - 1);
  return v;
}

/// attention_lse: an f32 or f64 attention's (..., Hq, L, Dv) -> (..., Hq, L).
constexpr Verdict attention_lse(std::span<const TensorView> in) {
  Verdict v;
  if (in[0].dtype != DType::F32 && in[0].dtype != DType::F64)
    return broken(Rule::lse_attention_is_f32_or_f64, 0);
  v.push_dims(0, 0, in[0].rank() - 1);
  return v;
}

/// merge_attention (oa, la, ob, lb): the outputs alike, the log-sum-exps alike and the
/// outputs' dims without the last.
constexpr Verdict merge_attention(std::span<const TensorView> in) {
  Verdict v;
  if (too_many_dims(in, 0, v) || !float_and_same(in, 1, -1, v) || !float_and_same(in, 3, -1, v) ||
      !float_and_same(in, 1, 3, v))
    return v;
  if (!same_dims(in[1], in[3]))
    return broken(Rule::same_dims, 1, 3);
  if (!float_and_same(in, 1, 0, v) || !float_and_same(in, 1, 2, v))
    return v;
  const TensorView &oa = in[0], &la = in[1];
  if (!same_dims(oa, in[2]))
    return broken(Rule::merge_outputs_dims_match, 0, 2);
  if (oa.rank() != la.rank() + 1 || !same_run(oa, 0, la, 0, la.rank()))
    return broken(Rule::merge_lse_is_output_rows, 0, 1);
  v.push_dims(0, 0, oa.rank());
  return v;
}

/// lengths (B), integer: what cache_mask reads.
constexpr Verdict lengths(std::span<const TensorView> in) {
  if (!is_int(in[0].dtype))
    return broken(Rule::is_integer_tensor, 0);
  if (in[0].rank() != 1)
    return broken(Rule::rank_is_1, 0);
  Verdict v;
  v.push_dim(0, 0);
  return v;
}

/// Integer (B), B the new rows' first dim.
constexpr bool lengths_fit(const TensorView &lengths, const TensorView &fresh) {
  return is_int(lengths.dtype) && lengths.rank() == 1 && same(lengths.at(0), fresh.at(0));
}

/// cache_view (past, lengths, fresh) -> (B, Hkv, C+n, Dh); paged_cache_view (pool, table,
/// lengths, fresh) -> (B, Hkv, M*page+n, Dh).
constexpr Verdict cache_view(std::span<const TensorView> in) {
  Verdict v;
  bool paged = in.size() == 4;
  int f = paged ? 3 : 2, l = paged ? 2 : 1;
  const TensorView &store = in[0], &fresh = in[static_cast<std::size_t>(f)];
  if (!float_and_same(in, 0, f, v))
    return v;
  if (store.rank() != 4 || fresh.rank() != 4)
    return broken(Rule::rank_is_4, store.rank() != 4 ? 0 : f);
  if (!same(store.at(1), fresh.at(1)) || !same(store.at(3), fresh.at(3)))
    return broken(Rule::cache_heads_and_head_dim_match, 0, f);
  if (!lengths_fit(in[static_cast<std::size_t>(l)], fresh))
    return broken(Rule::cache_lengths_are_batch, l, f, -1, 0);
  if (!paged && !same(store.at(0), fresh.at(0)))
    return broken(Rule::cache_batch_dims_match, 0, f, 0, 0);
  if (paged && (!is_int(in[1].dtype) || in[1].rank() != 2 || !same(in[1].at(0), fresh.at(0))))
    return broken(Rule::paged_cache_table_is_batch, 1, f, -1, 0);
  v.push_dim(f, 0);
  v.push_dim(f, 1);
  auto f8 = static_cast<std::int8_t>(f);
  v.push(paged ? DimSource{DimSource::ProductPlus, 1, 1, 0, 2, f8, 2}
               : DimSource{DimSource::Sum, 0, 2, f8, 2});
  v.push_dim(f, 3);
  return v;
}

} // namespace qkv::shape
