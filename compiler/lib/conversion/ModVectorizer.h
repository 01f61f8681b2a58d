// Emits a mod region (the score or mask region of qkv.attention) inside a vectorized
// kernel. Some of the region's arguments are vectors (the lanes' query or key positions,
// their scores); every op that depends on one becomes the same op on vectors, the rest
// stays scalar, so a mask like `qi >= kv` over 16 queries is one vector compare and an
// ALiBi slope loaded at the head is one scalar load.
#pragma once

#include "KernelBuilder.h"

namespace qkv::ir {

/// Emits the ops of `region` (whose first block ends in qkv.yield) at the builder's
/// insertion point and returns the yielded value, a scalar or a vector of `lanes`.
/// `lead` replaces the leading block arguments ([score,] b, h, q, kv, len_q, len_kv),
/// each a scalar or a vector<lanes x T>; `captures` replaces the captured tensors with
/// memrefs of identity layout. tensor.extract at per-lane indices becomes vector.gather;
/// an op that has no vector form is computed lane by lane. `checksHold`: the caller has
/// proved that every qkv.check of the region passes at the positions it is emitted for
/// (checksPass, TileClassifier.h), so none is emitted and their conditions are true.
mlir::Value emitModRegion(KernelBuilder &kb, mlir::Region &region, mlir::ValueRange lead,
                          mlir::ValueRange captures, int64_t lanes, bool checksHold = false);

} // namespace qkv::ir
