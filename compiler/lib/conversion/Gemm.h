// The blocked GEMM of qkv-lower-matmul-to-microkernels, as BLAS libraries do it (Goto and
// van de Geijn, "Anatomy of high-performance matrix multiplication"; BLIS):
//
//   C[M x N] = start + A[M x K] . B[K x N]
//
// B is packed into panels of nr = nv vectors of columns: panel p holds columns
// [p * nr, (p + 1) * nr) of every row of B, row after row, zero past N, so the
// micro-kernel reads one contiguous stream of B. A task takes a block of rows of C and a
// range of panels; for each block of kc rows of B (kc from the L1 and L2 sizes, at least
// kMinGemmKc: GemmBlocking::forTarget), it runs every mr x nr register tile of its rows
// and panels, the A rows of the block (mc x kc) staying in the L2 cache across panels.
//
// Three tiers multiply (docs/compiler.md, "ISA tiers"): FMAs on the accumulator's type
// (f32 or f64), reading bf16/f16 operands widened as they are packed; bf16 pairs on
// vdpbf16ps (AVX512-BF16), whose packed B holds rows 2k and 2k + 1 interleaved column by
// column (a panel's pair of rows is one vector per 16 columns) and whose packed A holds
// bf16 rows with an even K (a zero past an odd one); and AMX tiles (tdpbf16ps), which
// read the same two layouts as they are, K padded with zeros to whole tiles of 32: 16
// packed rows of B by 16 columns are one B tile (rows 2 * nr elements apart), 16 packed
// rows of A by 32 columns one A tile.
#pragma once

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "KernelBuilder.h"
#include "Microkernel.h"

namespace qkv::ir {

/// The fewest rows of B per K block that GemmBlocking::forTarget derives (not on AMX):
/// C's tiles go through memory once per block, 4 / kc bytes per flop, and a host whose
/// caches give fewer rows (1 MiB of L2 and 64-column f32 panels: 256) lost ~6% of its
/// time to those passes at K = 4096 (Zen 4: 85% of the FMA peak with kc = 256, 91% with
/// 512 and with 1024). A multiple of every tier's kGroup().
inline constexpr int64_t kMinGemmKc = 512;

/// The sizes of the blocked GEMM for one tier, element type and vector width.
struct GemmBlocking {
  mlir::Type acc;     ///< C's element type and the accumulators' (f32, f64)
  mlir::Type packed;  ///< the packed A's and B's: acc, or bf16 on the dot tier
  bool dot = false;   ///< bf16 pairs (acc is f32): vdpbf16ps, or AMX tiles with `amx`
  bool amx = false;   ///< the block function's tiles on AMX (tdpbf16ps); `dot` is set too
  int64_t lanes = 16; ///< accumulator elements per vector
  int64_t nv = 4;     ///< vectors of C per register tile row: nr = nv * lanes columns
  int64_t mr = 6;     ///< rows of a block function's tile (32 on AMX: two A tiles)
  int64_t skinnyMr = 6; ///< most rows the skinny function takes (its register tile's)
  int64_t kc = 128;   ///< rows of B per block (the K loop's step; a multiple of kAlign())
  int64_t mc = 96;    ///< most rows of C per task (a multiple of mr)
  int64_t nr() const { return nv * lanes; }
  /// Rows of B per packed row: 2 on the dot tier (a pair), else 1.
  int64_t kGroup() const { return dot ? 2 : 1; }
  /// A packed B's rows (and a packed A block's columns) are K rounded up to a multiple of
  /// this, zeros past K: 32 on AMX (a tile's 16 pairs), else kGroup().
  int64_t kAlign() const { return amx ? kAmxK : kGroup(); }
  /// Elements from one row of a packed A block to the next: kc, and on AMX one tile of K
  /// more, so that the 16 rows a tile load reads do not lie a multiple of 4 KiB apart
  /// (kc = 2048 bf16 would put all of them in one set of L1).
  int64_t aRowStride() const { return amx ? kc + kAmxK : kc; }
  /// K per AMX tile product (16 pairs of bf16), and rows / f32 columns per tile.
  static constexpr int64_t kAmxK = kAmxTileDepth, kAmxRows = kAmxTileRows;

  /// Register tiles for `vectorBits`-bit vectors of `acc` (16 vector registers below
  /// 512 bits, 32 at 512), kc and mc from the L1 and L2 data cache sizes in bytes:
  /// kc x nr packed elements of B take half of L1 or a sixteenth of L2, whichever is
  /// more, and kc is at least kMinGemmKc; mc x kc of A take at most half of L2. With
  /// `amx` (and `dot`), 32 x 32 tiles of C (2 x 2 AMX accumulators) and kc from L2
  /// (below). A positive `kcOverride` / `mcOverride` replaces the derived value (mc
  /// rounded up to a multiple of mr, kc to a multiple of kAlign()).
  static GemmBlocking forTarget(mlir::Type acc, bool dot, bool amx, int64_t vectorBits,
                                int64_t l1Bytes, int64_t l2Bytes, int64_t kcOverride = 0,
                                int64_t mcOverride = 0);
  /// This blocking's AMX form: tiles of 2 x 2 accumulators, kc and mc from L2.
  GemmBlocking amxBlocking(int64_t l2Bytes, int64_t kcOverride, int64_t mcOverride) const;
};

/// The 2-D view type the GEMM functions take: any offset and row stride, unit stride
/// along the rows.
mlir::MemRefType gemmViewType(mlir::Type elem);
/// The packed-B buffer type: one dimension, any offset.
mlir::MemRefType gemmPackedType(mlir::Type elem);
/// Rows of a packed B of k rows: k rounded up to a multiple of g.kAlign().
mlir::Value gemmPackedRows(KernelBuilder &kb, const GemmBlocking &g, mlir::Value k);
/// Elements of one packed B (or of one batch's) of k rows and `panels` panels: k rounded
/// up to whole groups, times the panels' columns.
mlir::Value gemmPackedSize(KernelBuilder &kb, const GemmBlocking &g, mlir::Value panels,
                           mlir::Value k);

/// func.func private @qkv_gemm_pack_b_<form>_<nr>(B: view of `bElem`, Bp: packed, p0, p1,
/// n, k): panels [p0, p1) of B (k x n) into Bp, panel p at p * k' * nr (k' = k rounded up
/// to whole groups), zero past column n and past row k, converted to the packed type.
/// Made once per module, form and nr.
mlir::func::FuncOp gemmPackBFunction(mlir::ModuleOp module, mlir::Type bElem,
                                     const GemmBlocking &g);

/// func.func private @qkv_gemm_block_<form>_<mr>x<nr>_k<kc>[_bias[_<type>]](A: view of
/// `aElem`, Bp: packed, C: view, i0, m, p0, p1, n, k, fill, fromC[, bias: 1-D of `bias`]):
/// C[i0 .. i0 + m)[p0 * nr .. min(n, p1 * nr)) = start + A . B, with B packed as
/// gemmPackBFunction writes it, start being C itself when fromC, else the bias row
/// (bias[j] for column j, widened when `bias` is narrower than C: a bf16 linear's bias)
/// when the function takes one (`bias` not null), else the fill. K = 0 writes the start
/// value. Made once per module, form, blocking and bias type. On AMX, `c` (C's element
/// type, g.acc when null) may be bf16 (`..._c_bf16`): each tile is then rounded to it from
/// an f32 scratch tile in L1 as it is written, C is never read, and the caller must pass
/// fromC false and k <= kc (one K block): no f32 C is ever made.
mlir::func::FuncOp gemmBlockFunction(mlir::ModuleOp module, mlir::Type aElem, const GemmBlocking &g,
                                     mlir::Type bias = {}, mlir::Type c = {});

/// func.func private @qkv_gemm_skinny_<form>_<mr>x<nr>[_bias[_<type>]](the block function's
/// operands): the same product for m <= skinnyMr rows (a decode step's), each panel one
/// tile of exactly m rows over the whole K: A read where it is (nothing packed), each
/// panel of B read once, as one stream (on AMX by vdpbf16ps: a few rows would fill
/// tiles of 16 with copies).
mlir::func::FuncOp gemmSkinnyFunction(mlir::ModuleOp module, mlir::Type aElem,
                                      const GemmBlocking &g, mlir::Type bias = {},
                                      mlir::Type c = {});

} // namespace qkv::ir
