// A register-tiled matrix-product micro-kernel emitted with the vector dialect:
//
//   C[M x N] = init(C) + A[M x K] . B[K x N]
//
// vectorized along N (nc vectors of `lanes` elements) and tiled over mr rows of C, so an
// mr x nc block of C lives in vector registers across the whole K loop: each step loads
// nc vectors of a B row, broadcasts mr scalars of A and issues mr * nc FMAs. Callers say
// how A, B and C are addressed, so one emitter serves QK^T and P.V inside flash attention
// and the projections (linalg.matmul) alike. With `dot`, the FMAs are bf16 pair dot
// products (vdpbf16ps: twice the FMA's work per instruction), K stepping over pairs.
#pragma once

#include <functional>
#include <optional>

#include "KernelBuilder.h"

namespace qkv::ir {

struct GemmSpec {
  mlir::Type elem;
  int64_t lanes = 16; // elements per vector
  int64_t nc = 4;     // vectors of C per row
  int64_t mr = 6;     // rows of C per register tile
  mlir::Value M, K;
  std::optional<int64_t> staticM; // when known, the last partial tile is one exact block
  /// A[i][k] as a scalar (broadcast by the kernel).
  std::function<mlir::Value(KernelBuilder &, mlir::Value i, mlir::Value k)> a;
  /// B[k][c * lanes .. (c + 1) * lanes) as a vector.
  std::function<mlir::Value(KernelBuilder &, mlir::Value k, int64_t c)> b;
  /// The value C's vector (i, c) starts from: zero, or C itself (accumulate), or C scaled.
  std::function<mlir::Value(KernelBuilder &, mlir::Value i, int64_t c)> init;
  /// Writes C's vector (i, c).
  std::function<void(KernelBuilder &, mlir::Value i, int64_t c, mlir::Value v)> store;
  /// When set, called at the start of every step k of a register tile whose first row is
  /// i0, to prefetch what a later tile reads (memref.prefetch): a hint, not a read.
  std::function<void(KernelBuilder &, mlir::Value i0, mlir::Value k)> prefetch;

  /// bf16 pairs on the dot-product instruction (x86vector.avx512.dot: vdpbf16ps), with f32
  /// accumulators: K counts pairs of A's columns (B's rows); `a` returns A's pair
  /// (i, 2k), (i, 2k + 1) as a vector<2xbf16> (broadcast by the kernel as one 32-bit
  /// element), `b` B's rows 2k and 2k + 1 interleaved column by column, a
  /// vector<(2 * lanes)xbf16> whose lanes pair up with C's.
  bool dot = false;
  /// When set (an i1), one more step of K after the loop, at k = K, whose A pair comes
  /// from `aTail` (an odd K's last column, paired with 0, read without reading past A).
  mlir::Value tail;
  std::function<mlir::Value(KernelBuilder &, mlir::Value i)> aTail;
};

/// Emits the loops for `spec` at the builder's insertion point.
void emitGemm(KernelBuilder &kb, const GemmSpec &spec);

/// One register tile: C rows [i0, i0 + rows) (rows <= spec.mr) by spec.nc vectors, over
/// the whole spec.K (spec.M is not read).
void emitGemmTile(KernelBuilder &kb, const GemmSpec &spec, mlir::Value i0, int64_t rows);

/// `pair` (a vector<2xbf16>) as one 32-bit element broadcast to vector<(2 * lanes)xbf16>:
/// the A operand of a bf16 dot product.
mlir::Value broadcastPair(KernelBuilder &kb, mlir::Value pair, int64_t lanes);

/// AMX rows per tile (and f32 columns of an accumulator tile), and bf16 columns of an
/// operand tile (16 rows of pairs).
inline constexpr int64_t kAmxTileRows = 16;
inline constexpr int64_t kAmxTileDepth = 32;

/// A tile's operands as its product reads them: `loadA(kb, r, step)` the A tile of rows r
/// (0: the top 16, 1: the bottom 16) at step `step` of the K loop, `loadB(kb, step, c)`
/// the B tile of columns c (0: the left 16, 1: the right 16), each a 16 x 32 bf16
/// !amx.tile.
using AmxLoadA = std::function<mlir::Value(KernelBuilder &, int64_t r, mlir::Value step)>;
using AmxLoadB = std::function<mlir::Value(KernelBuilder &, mlir::Value step, int64_t c)>;

/// A 32 x 32 block of C on AMX: `acc` (four 16 x 16 f32 accumulator tiles: {top left,
/// top right, bottom left, bottom right}) plus A . B over `steps` steps of 32 K columns,
/// each step two A tiles by two B tiles (four tdpbf16ps), the accumulators carried
/// through one loop. Returns them. The GEMM's AMX blocks and the attention kernel's AMX
/// products (QK^T and P.V) both run on it.
llvm::SmallVector<mlir::Value> emitAmxBlock(KernelBuilder &kb, mlir::Value steps,
                                            mlir::ValueRange acc, const AmxLoadA &loadA,
                                            const AmxLoadB &loadB);

/// Register-tile rows for nc vectors per row: as many rows as keep the C tile, one B row
/// and a broadcast within the 32 vector registers of AVX-512 (16 for AVX2).
int64_t gemmRowsFor(int64_t nc, int64_t vectorRegisters);

} // namespace qkv::ir
