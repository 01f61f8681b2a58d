// Block sparsity from the mask's own expression: the mask region is evaluated once per
// tile on intervals (every position the tile covers at once), which proves the tile
// empty (the mask is false everywhere in it: skipped, no loads, no math), full (true
// everywhere: no mask code) or neither (partial: the mask runs per element). Causal,
// sliding-window, prefix and block-diagonal masks are classified this way with no
// special case for their names, and so are masks that read tensors (lengths, prefixes,
// document ids: RangeTable); what the analysis cannot follow (float math, a load at
// ranges along two dims) makes a tile partial, which is always correct.
#pragma once

#include <optional>

#include "llvm/ADT/DenseSet.h"

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

/// The smallest and largest values of every run of a captured integer tensor's last dim,
/// from the data of one call: sparse tables, level k holding the min (max) of the 2^k
/// elements from each position, (levels, rows, n) for a tensor (rows, n) or (n). Any run
/// [lo, hi] is then two loads per bound, so a mask that loads at a tile's range of
/// positions (`doc[kv] == doc[q]`: packed documents) is classified from the values the
/// tile reads, in O(1) per tile after O(n log n) per call.
struct RangeTable {
  mlir::Value min, max; ///< memref<?x?x?xT>
  mlir::Value n;        ///< the last dim's extent
  mlir::Value rows;     ///< the rows (1 for a tensor of rank 1)
};

/// The captures (by their index among the mask's capture arguments, which follow the six
/// positions) that need a range table: integer tensors of rank 1 or 2 loaded at an index
/// along the last dim that depends on q or kv, and at others that do not.
llvm::SmallDenseSet<unsigned> rangedCaptures(mlir::Region &mask);

/// The range tables of the captures `mask` loads at a range of positions along their last
/// dim (an index that depends on q or kv; the others do not), built from `captures`
/// (memrefs) now; nullopt for the others. Integer tensors of rank 1 and 2 only.
llvm::SmallVector<std::optional<RangeTable>> buildRangeTables(KernelBuilder &kb,
                                                              mlir::Region &mask,
                                                              mlir::ValueRange captures);
/// Frees what buildRangeTables allocated.
void freeRangeTables(KernelBuilder &kb, llvm::ArrayRef<std::optional<RangeTable>> tables);

/// Emits the interval evaluation of `mask` (a mask region: b, h, q, kv, len_q, len_kv,
/// captures...) for positions in `ranges` (six intervals, in that order). A load from a
/// captured tensor (`captures`: memrefs) at indices known exactly for the tile (b, h, or
/// constants) is made, so `kv <= lengths[b] + q` is classified too; a load at a range of
/// indices along the last dim takes the range's min and max from the capture's table
/// (`tables`, one entry per capture), and is unknown without one. Returns nullopt when the
/// expression cannot say anything about any tile (then every tile is partial).
std::optional<TileClass> classifyTile(KernelBuilder &kb, mlir::Region &mask,
                                      llvm::ArrayRef<Interval> ranges,
                                      mlir::ValueRange captures = {},
                                      llvm::ArrayRef<std::optional<RangeTable>> tables = {});

/// Whether every qkv.check of `mod` (a checked compile's guard of a load or a division)
/// passes at every position in `ranges` (b, h, q, kv, len_q, len_kv), from the mod
/// evaluated on intervals as classifyTile evaluates a mask; `first` is the index of the
/// mod's b argument (1 in a score_mod, after the score; 0 in a mask). An i1, true where
/// the tile may run the mod without its checks (emitModRegion's checksHold); null when
/// the mod has no checks, or when the analysis cannot prove one of them for any tile
/// (then every element is checked, as before). A check whose indices the tile's ranges
/// keep within the tensor, `rel_bias[h, q - kv + len_kv - 1]` in most tiles, passes. The
/// proof also requires that no interval's ends wrapped (sums of values within +-2^62,
/// products within +-2^31): wrapped ends say nothing of the values between them.
mlir::Value checksPass(KernelBuilder &kb, mlir::Region &mod, unsigned first,
                       llvm::ArrayRef<Interval> ranges, mlir::ValueRange captures = {},
                       llvm::ArrayRef<std::optional<RangeTable>> tables = {});

} // namespace qkv::ir
