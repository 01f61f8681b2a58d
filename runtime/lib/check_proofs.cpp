// Which check sites need no check: the ranges of a mod's integer expressions, from the
// op's dims alone (never from what a tensor holds), prove that a load stays within its
// tensor or a divisor is never 0. A proved site carries no check in compiled code.
#include "check_proofs.hpp"

#include <algorithm>
#include <limits>
#include <optional>
#include <unordered_map>

namespace qkv::checks::proofs {

namespace {

using i64 = std::int64_t;
using i128 = __int128;
constexpr i64 kMin = std::numeric_limits<i64>::min(), kMax = std::numeric_limits<i64>::max();

/// The values an integer expression can take, [lo, hi]. Bounds are exact over the
/// operands' ranges; a result that can leave i64 wraps in compiled code, so its range is
/// all of i64.
struct Range {
  i64 lo = kMin, hi = kMax;
};

Range make(i128 lo, i128 hi) {
  if (lo < kMin || hi > kMax)
    return {};
  return {static_cast<i64>(lo), static_cast<i64>(hi)};
}

Range negate(Range r) { return make(-static_cast<i128>(r.hi), -static_cast<i128>(r.lo)); }

Range sum(Range a, Range b) {
  return make(static_cast<i128>(a.lo) + b.lo, static_cast<i128>(a.hi) + b.hi);
}

Range product(Range a, Range b) {
  // |a|, |b| < 2^63, so each product fits in 128 bits.
  i128 c[] = {static_cast<i128>(a.lo) * b.lo, static_cast<i128>(a.lo) * b.hi,
              static_cast<i128>(a.hi) * b.lo, static_cast<i128>(a.hi) * b.hi};
  return make(*std::min_element(c, c + 4), *std::max_element(c, c + 4));
}

Range hull(Range a, Range b) { return {std::min(a.lo, b.lo), std::max(a.hi, b.hi)}; }

Range absolute(Range r) {
  if (r.lo >= 0)
    return r;
  if (r.hi <= 0)
    return negate(r);
  return make(0, std::max(-static_cast<i128>(r.lo), static_cast<i128>(r.hi)));
}

/// The largest magnitude in r.
i128 magnitude(Range r) { return std::max(-static_cast<i128>(r.lo), static_cast<i128>(r.hi)); }

bool excludes(Range r, i64 v) { return r.lo > v || r.hi < v; }

/// x / d as compiled code computes it (truncating; a divisor of 0, or -1 under INT64_MIN,
/// replaced by 1): |x / d| <= |x| always, and for x >= 0 over d in [dlo >= 1, dhi] the
/// quotient lies in [lo / dhi, hi / dlo].
Range quotient(Range x, Range d) {
  if (x.lo >= 0 && d.lo >= 1)
    return {x.lo / d.hi, x.hi / d.lo};
  i128 m = magnitude(x);
  return make(-m, m);
}

/// x % d (a divisor of 0, or -1, replaced by 1, so 0): |x % d| <= |x| and < |d|, with the
/// sign of x.
Range remainder(Range x, Range d) {
  i128 m = std::min(magnitude(x), std::max<i128>(magnitude(d) - 1, 0));
  if (x.lo >= 0)
    return make(0, m);
  return x.hi <= 0 ? make(-m, 0) : make(-m, m);
}

Range of_dim(const std::optional<Dim> &d) {
  if (!d)
    return {0, 0}; // the position does not exist in this op's layout: always 0
  return {0, (d->is_static() ? d->extent : kMaxExtent) - 1};
}

class Ranges {
public:
  Ranges(const Graph &g, const Positions &p) : g_(g), p_(p) {}

  /// Each node once: an expression is a DAG (x + x shares x), and walking it as a tree
  /// would take time exponential in its depth.
  Range of(const ExprNode &e) const {
    auto it = memo_.find(&e);
    if (it != memo_.end())
      return it->second;
    Range r = compute(e);
    memo_.emplace(&e, r);
    return r;
  }

private:
  Range compute(const ExprNode &e) const {
    const auto arg = [&](std::size_t i) { return of(*e.args.at(i)); };
    switch (e.op) {
    case ExprOp::IndexB: return of_dim(p_.b);
    case ExprOp::IndexH: return of_dim(p_.h);
    case ExprOp::IndexQ: return of_dim(p_.q);
    case ExprOp::IndexKV: return of_dim(p_.kv);
    case ExprOp::LenQ: return length(p_.q);
    case ExprOp::LenKV: return length(p_.kv);
    case ExprOp::ConstInt: return {e.ival, e.ival};
    case ExprOp::Neg: return negate(arg(0));
    case ExprOp::Abs: return absolute(arg(0));
    case ExprOp::Add: return sum(arg(0), arg(1));
    case ExprOp::Sub: return sum(arg(0), negate(arg(1)));
    case ExprOp::Mul: return product(arg(0), arg(1));
    case ExprOp::Div: return quotient(arg(0), arg(1));
    case ExprOp::Mod: return remainder(arg(0), arg(1));
    case ExprOp::Min: return {std::min(arg(0).lo, arg(1).lo), std::min(arg(0).hi, arg(1).hi)};
    case ExprOp::Max: return {std::max(arg(0).lo, arg(1).lo), std::max(arg(0).hi, arg(1).hi)};
    case ExprOp::Select: return hull(arg(1), arg(2));
    case ExprOp::Load: return loaded(e);
    default: return {}; // an op whose integer range is not followed
    }
  }

  static Range length(const std::optional<Dim> &d) {
    if (!d)
      return {1, 1};
    return d->is_static() ? Range{d->extent, d->extent} : Range{0, kMaxExtent};
  }

  /// Any value the tensor's dtype holds: what it holds is not known when compiling.
  Range loaded(const ExprNode &e) const {
    if (g_.node(e.tensor).dtype == DType::I32)
      return {std::numeric_limits<std::int32_t>::min(), std::numeric_limits<std::int32_t>::max()};
    return {};
  }

  const Graph &g_;
  const Positions &p_;
  mutable std::unordered_map<const ExprNode *, Range> memo_;
};

/// Whether index `e` of a load lies in [0, extent of `axis`) at every position.
bool index_in(const Ranges &ranges, const Positions &p, const ExprNode &e, const Dim &axis) {
  const std::optional<Dim> *pos = e.op == ExprOp::IndexB    ? &p.b
                                  : e.op == ExprOp::IndexH  ? &p.h
                                  : e.op == ExprOp::IndexQ  ? &p.q
                                  : e.op == ExprOp::IndexKV ? &p.kv
                                                            : nullptr;
  // The position itself, over a dim of the same name: the two extents are bound as one.
  if (pos && *pos && (*pos)->name == axis.name)
    return true;
  Range r = ranges.of(e);
  return axis.is_static() && r.lo >= 0 && r.hi < axis.extent;
}

} // namespace

std::optional<Positions> positions_of(const Graph &g, const Node &op) {
  if (op.op == OpKind::Attention) {
    const Node &q = g.node(op.inputs.at(0)), &k = g.node(op.inputs.at(1));
    int r = q.rank(), rk = k.rank();
    if (r < 2 || rk < 2)
      return std::nullopt;
    Positions p;
    if (r == 4)
      p.b = q.dims[0];
    if (r >= 3)
      p.h = q.dims[static_cast<std::size_t>(r - 3)];
    p.q = q.dims[static_cast<std::size_t>(r - 2)];
    p.kv = k.dims[static_cast<std::size_t>(rk - 2)];
    return p;
  }
  if (op.op == OpKind::Mask || op.op == OpKind::ScoreMod) {
    const Node &s = g.node(op.inputs.at(0));
    auto r = static_cast<std::size_t>(s.rank());
    if (r < 2)
      return std::nullopt;
    Positions p;
    if (r >= 4)
      p.b = s.dims[r - 4];
    if (r >= 3)
      p.h = s.dims[r - 3];
    p.q = s.dims[r - 2];
    p.kv = s.dims[r - 1];
    return p;
  }
  return std::nullopt;
}

bool proven(const Graph &g, const Positions &p, const ExprNode &site) {
  Ranges ranges(g, p);
  if (site.op == ExprOp::Load) {
    const Node &t = g.node(site.tensor);
    if (site.args.size() != t.dims.size())
      return false;
    for (std::size_t d = 0; d < site.args.size(); ++d)
      if (!index_in(ranges, p, *site.args[d], t.dims[d]))
        return false;
    return true;
  }
  if (site.op != ExprOp::Div && site.op != ExprOp::Mod)
    return false;
  Range divisor = ranges.of(*site.args.at(1));
  if (!excludes(divisor, 0))
    return false;
  // INT64_MIN / -1 overflows; the remainder has no such case (compiled code maps -1 to 1).
  return site.op == ExprOp::Mod || excludes(divisor, -1) || ranges.of(*site.args[0]).lo > kMin;
}

} // namespace qkv::checks::proofs
