// Block sparsity from the mask's own expression: the mask region is evaluated once per
// tile on intervals (every position the tile covers at once), which proves the tile
// empty (the mask is false everywhere in it: skipped, no loads, no math), full (true
// everywhere: no mask code) or neither (partial: the mask runs per element). Causal,
// sliding-window, prefix and block-diagonal masks are classified this way with no
// special case for their names; what the analysis cannot follow (a load from a captured
// tensor, float math) makes a tile partial, which is always correct.
#pragma once

#include <optional>

#include "KernelBuilder.h"

namespace qkv::ir {

/// A closed interval of index values [lo, hi], or for an i1: lo = "certainly true",
/// hi = "possibly true".
struct Interval {
  mlir::Value lo, hi;
};

struct TileClass {
  mlir::Value full;  // i1: the mask is true at every position of the tile
  mlir::Value empty; // i1: the mask is false at every position of the tile
};

/// Emits the interval evaluation of `mask` (a mask region: b, h, q, kv, len_q, len_kv,
/// captures...) for positions in `ranges` (six intervals, in that order). A load from a
/// captured tensor (`captures`: memrefs) at indices known exactly for the tile (b, h, or
/// constants) is made, so `kv <= lengths[b] + q` is classified too; a load at a range of
/// indices is unknown. Returns nullopt when the expression cannot say anything about any
/// tile (then every tile is partial).
std::optional<TileClass> classifyTile(KernelBuilder &kb, mlir::Region &mask,
                                      llvm::ArrayRef<Interval> ranges,
                                      mlir::ValueRange captures = {});

} // namespace qkv::ir
