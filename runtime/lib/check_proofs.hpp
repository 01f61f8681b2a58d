// Check sites proved safe at compile time (check_proofs.cpp), for qkv::checks::sites.
#pragma once

#include <cstdint>
#include <optional>

#include <qkv/dsl/graph.hpp>

namespace qkv::checks::proofs {

/// The longest axis a kernel takes (Kernel::run refuses a longer one): a bound on every
/// dynamic extent, so that the ranges of a mod's integers are finite.
inline constexpr std::int64_t kMaxExtent = std::int64_t{1} << 40;

/// The dims a mod's positions run over: b, h, q in [0, extent), kv likewise; a position
/// the op's layout lacks (b and h of (L, S) scores) is always 0.
struct Positions {
  std::optional<Dim> b, h, q, kv;
};

/// The positions of an attention, mask or score_mod node; none for another op.
std::optional<Positions> positions_of(const Graph &g, const Node &op);

/// Whether `site` (a load, an integer division or remainder) cannot fail at any position:
/// every index within its tensor's dims, or the divisor never 0 (nor -1 under INT64_MIN),
/// whatever the captured tensors hold.
bool proven(const Graph &g, const Positions &p, const ExprNode &site);

} // namespace qkv::checks::proofs
