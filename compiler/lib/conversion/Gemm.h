// The blocked GEMM of qkv-lower-matmul-to-microkernels, as BLAS libraries do it (Goto and
// van de Geijn, "Anatomy of high-performance matrix multiplication"; BLIS):
//
//   C[M x N] = start + A[M x K] . B[K x N]
//
// B is packed into panels of nr = nv vectors of columns: panel p holds columns
// [p * nr, (p + 1) * nr) of every row of B, row after row, zero past N, so the
// micro-kernel reads one contiguous stream of B. A task takes a block of rows of C and a
// range of panels; for each block of kc rows of B (kc chosen so that a panel's kc x nr
// block stays in the L1 cache), it runs every mr x nr register tile of its rows and
// panels, the A rows of the block (mc x kc) staying in the L2 cache across panels.
#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "KernelBuilder.h"

namespace qkv::ir {

/// The sizes of the blocked GEMM for one element type and vector width.
struct GemmBlocking {
  int64_t lanes = 16; ///< elements per vector
  int64_t nv = 4;     ///< vectors of C per register tile row: nr = nv * lanes columns
  int64_t mr = 6;     ///< rows of a register tile
  int64_t kc = 128;   ///< rows of B per block (the K loop's step)
  int64_t mc = 96;    ///< most rows of C per task (a multiple of mr)
  int64_t nr() const { return nv * lanes; }

  /// Register tiles for `vectorBits`-bit vectors of `elem` (16 vector registers below
  /// 512 bits, 32 at 512), kc and mc from the L1 and L2 data cache sizes in bytes:
  /// kc x nr elements of B take at most half of L1, mc x kc of A at most half of L2. A
  /// positive `kcOverride` / `mcOverride` replaces the derived value (mc rounded up to a
  /// multiple of mr).
  static GemmBlocking forTarget(mlir::Type elem, int64_t vectorBits, int64_t l1Bytes,
                                int64_t l2Bytes, int64_t kcOverride = 0, int64_t mcOverride = 0);
};

/// The 2-D view type the GEMM functions take: any offset and row stride, unit stride
/// along the rows.
mlir::MemRefType gemmViewType(mlir::Type elem);
/// The packed-B buffer type: one dimension, any offset.
mlir::MemRefType gemmPackedType(mlir::Type elem);

/// func.func private @qkv_gemm_pack_b_<T>_<nr>(B: view, Bp: packed, p0, p1, n, k):
/// panels [p0, p1) of B (k x n) into Bp, panel p at p * k * nr, zero past column n.
/// Made once per module, element type and nr.
mlir::func::FuncOp gemmPackBFunction(mlir::ModuleOp module, mlir::Type elem,
                                     const GemmBlocking &g);

/// func.func private @qkv_gemm_block_<T>_<mr>x<nr>_k<kc>[_bias](A: view, Bp: packed,
/// C: view, i0, m, p0, p1, n, k, fill, fromC[, bias: packed]):
/// C[i0 .. i0 + m)[p0 * nr .. min(n, p1 * nr)) = start + A . B, with B packed as
/// gemmPackBFunction writes it, start being C itself when fromC, else the bias row
/// (bias[j] for column j) when the function takes one, else the fill. K = 0 writes the
/// start value. Made once per module, element type, blocking and form.
mlir::func::FuncOp gemmBlockFunction(mlir::ModuleOp module, mlir::Type elem, const GemmBlocking &g,
                                     bool bias = false);

/// func.func private @qkv_gemm_skinny_<T>_<mr>x<nr>[_bias](the block function's
/// operands): the same product for m <= mr rows (a decode step's), each panel one tile of
/// exactly m rows over the whole K: A read where it is (nothing packed), each panel of B
/// read once, as one stream.
mlir::func::FuncOp gemmSkinnyFunction(mlir::ModuleOp module, mlir::Type elem,
                                      const GemmBlocking &g, bool bias = false);

} // namespace qkv::ir
