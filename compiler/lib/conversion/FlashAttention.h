// The fused attention kernels qkv-lower-attention-to-flash emits for one qkv.attention:
// what they share (the op's operands as buffers, its sizes, the schedule) and the two
// kernels, the tiled one (FlashAttention-2 style, vectorized over queries) and the
// split-KV decode one (few queries, long KV, vectorized over the head dim).
#pragma once

#include "KernelBuilder.h"
#include "TileClassifier.h"

#include "mlir/IR/PatternMatch.h"

#include "qkv/compiler/ir/QkvDialect.h"

namespace qkv::ir {

/// Tile sizes and vector width, resolved for one element type.
struct FlashSchedule {
  int64_t lanes;      // elements per vector register
  int64_t qTile;      // query rows per tile: a multiple of lanes
  int64_t kvTile;     // keys per tile
  int64_t registers;  // vector registers of the ISA (32 for AVX-512, 16 otherwise)
  int64_t decodeRows; // at most this many queries take the split-KV decode kernel
  int64_t minSplit;   // keys per split at least, in the decode kernel
  /// The tiled kernel's products on bf16 pairs (vdpbf16ps, the avx512bf16 tier): q, k
  /// and v are bf16; QK^T reads q and k as they are, P is rounded to bf16 for P.V, and V
  /// is packed in pairs of keys per key tile (FlashPairs.cpp).
  bool dot = false;
  /// Both products on AMX tiles (the amx tier, FlashAmx.cpp): the pairs tier's q and P
  /// layouts, K and V packed once per call. Needs 16-lane vectors and query and key tiles
  /// in whole blocks of 32.
  bool amx = false;
  /// The f32 products prefetch what the next products read (tileScoresF: the tile's value
  /// rows; tileValuesF: the next tile's key rows), spread one line per step. For tiles of
  /// few queries, whose products are too short for the hardware's prefetchers to keep K
  /// and V streaming in while they compute.
  bool prefetch = false;
};

/// K and V packed for the AMX tiles (FlashAmx.cpp), once per call, as flat bf16 buffers:
/// k[((b * Hkv + hk) * keys + j) * dh + d] = K[b, hk, j, d] and
/// v[((b * Hkv + hk) * dv + d) * keys + j] = V[b, hk, j, d], zeros past S, Dh and Dv.
struct AmxOperands {
  mlir::Value k, v;
  mlir::Value keys; // S rounded up to whole key tiles
  mlir::Value dh;   // Dh rounded up to whole tiles of 32
  mlir::Value dv;   // Dv rounded up to whole blocks of 32
};

/// Buffers one task of the tiled kernel works in, all on its stack.
struct TileBuffers {
  mlir::Value qT;   // Dh x qTile: the query tile, transposed and pre-scaled
  mlir::Value sT;   // kvTile x qTile: scores, then probabilities, transposed
  mlir::Value oT;   // Dv x qTile: the output accumulator, transposed
  mlir::Value m, l; // qTile: running max (log2 units) and sum
  mlir::Value corr; // qTile: this tile's rescale factor, at the end 1 / l
  mlir::Value counts; // 3 x i64: the task's key tiles, those computed, those without mask code
  // The f32 tier with K or V stored narrower than the kernel computes (bf16, f16): one
  // key tile's rows widened once (kvTile x max(Dh, Dv)), K's for the scores, then V's for
  // the values, so that the register tiles broadcast f32 from it instead of widening each
  // element they read (widenK, widenV: which of the two are stored narrower); else null.
  mlir::Value kvW;
  bool widenK = false, widenV = false;
  // The bf16 pairs tier (FlashSchedule::dot): qT is instead ceil(Dh / 2) x 2 qTile bf16,
  // pairs of head dims interleaved per query, unscaled; and
  mlir::Value pT; // ceil(kvTile / 2) x 2 qTile bf16: P rounded, pairs of keys per query
  mlir::Value vP; // ceil(kvTile / 2) x 2 Dv' bf16: V, pairs of keys per head dim (Dv'
                  // is Dv rounded up to whole vectors)
  mlir::Value scoreScale; // the scale its f32 scores take (q is packed unscaled)
  // The AMX form (FlashSchedule::amx): qT has dh / 2 rows, oT dv rows, vP is unused, and
  AmxOperands amx; // the packed K and V
};

/// How a kernel addresses q, k, v or the output. The buffer has the operand's own shape
/// (..., H, L, D), or it is the (..., L, H*D) tensor that qkv.split_heads read or
/// qkv.merge_heads writes: then element (b, h, row, col) lives at (b, row, h*D + col),
/// and the kernel reads or writes it there, saving the copy the reshape would make.
/// A paged cache's pool (pages, Hkv, page, D) is read through its block table (B, M):
/// element (b, h, row, col) lives at (table[b, row / page], h, row % page, col).
/// An operand that is the widening (arith.extf) of an f16/bf16 tensor is read from that
/// tensor, each load widened (loadAs): the kernels never read a widened copy.
struct HeadView {
  mlir::Value mem;
  int64_t rank = 4;    // rank of the (..., H, L, D) operand
  mlir::Value headDim; // D, when merged
  bool merged = false;
  mlir::Value table, pageRows; // paged: the block table (memref) and the page size
  /// Indices of element (b, h, row, col), without the absent leading dims.
  llvm::SmallVector<mlir::Value> at(KernelBuilder &kb, mlir::Value b, mlir::Value h,
                                    mlir::Value row, mlir::Value col) const;
};

/// Where key or value rows live: one operand, or the parts of a cache view (cache_view,
/// paged_cache_view), whose key axis for sequence b is the stored rows [0, len_b), this
/// step's fresh rows [len_b, len_b + n), then zeros. The kernels read each part where it
/// is: no row of a cache is copied.
struct RowSource {
  HeadView stored;     // the operand itself, or the cache's storage
  HeadView fresh;      // cache views: this step's rows
  mlir::Value lengths; // cache views: the (B) stored lengths (memref)
  mlir::Value n;       // cache views: the fresh rows' count
  bool cached() const { return bool(lengths); }
};

/// A run of the key axis, [begin, end), all read the same way.
struct KeySegment {
  enum Kind { Stored, Fresh, Zeros } kind = Stored;
  mlir::Value begin, end;
  mlir::Value len; // Fresh: the stored length, subtracted from the row
};

/// One qkv.attention's operands and sizes, as the kernels read them.
struct AttentionInfo {
  AttentionOp op;
  int64_t rank;    // 2, 3 or 4
  mlir::Type ft;   // f32 or f64
  HeadView q, out; // out: a fresh buffer
  /// The op's log-sum-exp result (..., Hq, L) as a fresh buffer, or null without one.
  mlir::Value lse;
  RowSource k, v;
  llvm::SmallVector<mlir::Value> captures;          // memrefs with identity layout
  /// The mask's range tables (TileClassifier.h), one entry per capture, built from this
  /// call's data before the CPU kernels (qkv-lower-attention-to-flash) and freed after.
  llvm::SmallVector<std::optional<RangeTable>> tables;
  /// The tiled kernel's tile counts of this op (qkv-lower-attention-to-flash): the i64
  /// global it adds to, at slots tileSlot .. tileSlot + 2 (tiles, computed, full), or null.
  mlir::Value tileCounts;
  int64_t tileSlot = 0;
  mlir::Value nB, nH, nHk, nL, nS, nDh, nDv, group; // sizes (index)
  std::optional<int64_t> staticDh, staticDv;
  mlir::Value scale;                              // the softmax scale (1/sqrt(Dh) by default)
  bool scalePositive = true; // the scale is > 0: 1/sqrt(Dh), or a positive `scale` attribute
  mlir::Region *score = nullptr, *mask = nullptr; // the mods, when present
};

/// The operands of `op` as buffers (bufferization.to_buffer at the builder's insertion
/// point), its sizes and scale, and a fresh output buffer.
AttentionInfo describe(KernelBuilder &kb, AttentionOp op);
/// Indices of row (b, h, row) of the log-sum-exp buffer, without the absent leading dims.
llvm::SmallVector<mlir::Value> lseAt(const AttentionInfo &a, mlir::Value b, mlir::Value h,
                                     mlir::Value row);
/// The natural log-sum-exp of a row (or a vector of rows) from its running max `m` (log2
/// units) and sum `l` of 2^(s - m): (m + log2 l) ln 2; -inf when nothing was kept.
mlir::Value rowLse(KernelBuilder &kb, mlir::Value m, mlir::Value l);
/// Replaces `op` (or the merge_heads reading it, when the kernel wrote the merged layout)
/// by the output buffer as a tensor, and its log-sum-exp, if any, by that buffer.
void replaceWithOutput(mlir::PatternRewriter &rw, mlir::ImplicitLocOpBuilder &ib, AttentionOp op,
                       const AttentionInfo &a);

/// The segments of sequence b's key axis [0, nS): one for a plain operand; stored rows,
/// fresh rows and zeros for a cache view.
llvm::SmallVector<KeySegment> keySegments(KernelBuilder &kb, const AttentionInfo &a, mlir::Value b);
/// The f16/bf16 tensor `t` is the widening (arith.extf) of, or `t` itself.
mlir::Value unwidened(mlir::Value t);
/// A load from `v` as `t` (f32, or a vector of it): a view may hold f16/bf16 (an operand
/// the import widened is read where it is, at its own width), and the value is widened.
mlir::Value loadAs(KernelBuilder &kb, mlir::Type t, const HeadView &v, mlir::ValueRange at,
                   mlir::Value mask = {});
/// A gather from `v` (KernelBuilder::gather) as vector type `vt`, widened the same way.
mlir::Value gatherAs(KernelBuilder &kb, mlir::VectorType vt, const HeadView &v,
                     mlir::ValueRange at, mlir::Value offsets, mlir::Value mask);

/// Element (b, h, row, col) of `src` for a key row in `seg` (0 in the zeros segment).
mlir::Value readRow(KernelBuilder &kb, mlir::Type ft, const RowSource &src,
                    const KeySegment &seg, mlir::Value b, mlir::Value h, mlir::Value row,
                    mlir::Value col);
/// A prefetch (into L2) of the line holding element (b, h, row, col) of `src` for a key row
/// in `seg` (none in the zeros segment): row must be one of the segment's.
void prefetchRow(KernelBuilder &kb, const RowSource &src, const KeySegment &seg, mlir::Value b,
                 mlir::Value h, mlir::Value row, mlir::Value col);
/// The vector at (b, h, row, col .. col + lanes) (lanes off in `mask` read 0).
mlir::Value readRowVector(KernelBuilder &kb, mlir::VectorType vt, const RowSource &src,
                          const KeySegment &seg, mlir::Value b, mlir::Value h, mlir::Value row,
                          mlir::Value col, mlir::Value mask);

/// Score and mask for the lanes of one tile row: `s` holds the raw scores (scale * q.k)
/// unless there is no score mod, in which case it is already in log2 units. Returns the
/// scores in log2 units with masked, -inf and NaN scores as -inf. `qi`/`kv` are scalars
/// or vectors of positions; `withMask` says whether the mask must run.
mlir::Value emitScoreAndMask(KernelBuilder &kb, const AttentionInfo &a, mlir::Value s,
                             mlir::Value b, mlir::Value h, mlir::Value qi, mlir::Value kv,
                             bool withMask, int64_t lanes, bool checksHold = false);

/// A tile's positions as the intervals of a mod's b, h, q, kv, len_q and len_kv (what
/// classifyTile and checksPass take): batch b, heads `h`, queries `q`, keys `kv` (each
/// [lo, hi], both ends in), the lengths as bound.
llvm::SmallVector<Interval> tileRanges(const AttentionInfo &a, mlir::Value b, Interval h,
                                       Interval q, Interval kv);

/// What the mask says about queries [i0, i0 + rows) x keys [j0, j0 + cols) of (b, h)
/// (TileClassifier.h): nullopt without a mask or when it cannot tell.
std::optional<TileClass> classifyKeys(KernelBuilder &kb, const AttentionInfo &a, mlir::Value b,
                                      mlir::Value h, mlir::Value i0, mlir::Value rows,
                                      mlir::Value j0, mlir::Value cols);

/// Whether every check of the mods that run in queries [i0, i0 + rows) x keys [j0, j0 +
/// cols) of (b, h) passes there (checksPass, TileClassifier.h; the mask's only
/// `withMask`): an i1 to branch on, emitting the tile's mods with checksHold (no check)
/// where it is true; null when no mod checks anything or one's checks cannot be proved.
mlir::Value modChecksPass(KernelBuilder &kb, const AttentionInfo &a, mlir::Value b, mlir::Value h,
                          mlir::Value i0, mlir::Value rows, mlir::Value j0, mlir::Value cols,
                          bool withMask);
/// The same over the positions in `ranges` (b, h, q, kv, len_q, len_kv).
mlir::Value modChecksPass(KernelBuilder &kb, const AttentionInfo &a,
                          llvm::ArrayRef<Interval> ranges, bool withMask);

/// Offsets, in elements, from a row of `v`'s buffer to the next `lanes` rows (lane i: i
/// rows down), for gathering a column of a tile or scattering one.
mlir::Value rowOffsets(KernelBuilder &kb, const HeadView &v, int64_t lanes);

// ---- the bf16 pairs tier of the tiled kernel (FlashPairs.cpp) ------------------------

/// qT's pairs: qT[dp][2 i + t] = q[b, h, i0 + i, 2 dp + t] as it is (bf16, unscaled), 0
/// past the tile's rows and past Dh.
void packQueryPairs(KernelBuilder &kb, const AttentionInfo &a, const FlashSchedule &s,
                    const TileBuffers &t, mlir::Value b, mlir::Value h, mlir::Value i0,
                    mlir::Value rows);
/// sT[j][i] = sum_d K[b, hk, j0 + j, d] * q[i0 + i, d], unscaled, on bf16 pairs.
void tileScorePairs(KernelBuilder &kb, const AttentionInfo &a, const FlashSchedule &s,
                    const TileBuffers &t, const KeySegment &seg, mlir::Value b, mlir::Value hk,
                    mlir::Value j0, mlir::Value cols, bool fullTile);
/// pT for the queries of vector c: probabilities exp2(sT[j][c..] - mUse) (with `scale`:
/// exp2(sT[j][c..] * scale - mUse), the scores left raw) rounded to bf16, keys 2 jp and
/// 2 jp + 1 interleaved, a zero past cols; returns their f32 sum.
mlir::Value probabilityPairs(KernelBuilder &kb, const FlashSchedule &s, const TileBuffers &t,
                             mlir::Value c, mlir::Value cols, mlir::Value mUse,
                             mlir::Value scale = {});
/// oT[d][i] = oT[d][i] * corr[i] + sum_j V[b, hk, j0 + j, d] * pT[j][i], V packed in pairs
/// of keys first (vP), on bf16 pairs.
void tileValuePairs(KernelBuilder &kb, const AttentionInfo &a, const FlashSchedule &s,
                    const TileBuffers &t, const KeySegment &seg, mlir::Value b, mlir::Value hk,
                    mlir::Value j0, mlir::Value cols);

// ---- the AMX form of the pairs tier (FlashAmx.cpp) -----------------------------------

/// K and V packed for the tiles, in a parallel loop over (b, kv head, key tile); freed by
/// freeAmxOperands after the query tiles.
AmxOperands packForAmx(KernelBuilder &kb, const AttentionInfo &a, const FlashSchedule &s);
void freeAmxOperands(KernelBuilder &kb, const AmxOperands &p);
/// qT's rows past Dh's pairs, up to t.amx.dh / 2, set to 0.
void zeroQueryPadAmx(KernelBuilder &kb, const AttentionInfo &a, const FlashSchedule &s,
                     const TileBuffers &t);
/// sT[j][i] = sum_d K[b, hk, j0 + j, d] * q[i0 + i, d] for the blocks of 32 keys that
/// hold the tile's `cols` keys, unscaled, on AMX tiles.
void tileScoresAmx(KernelBuilder &kb, const AttentionInfo &a, const FlashSchedule &s,
                   const TileBuffers &t, mlir::Value b, mlir::Value hk, mlir::Value j0,
                   mlir::Value cols);
/// oT[d][i] = oT[d][i] * corr[i] + sum_j V[b, hk, j0 + j, d] * pT[j][i], on AMX tiles.
void tileValuesAmx(KernelBuilder &kb, const AttentionInfo &a, const FlashSchedule &s,
                   const TileBuffers &t, mlir::Value b, mlir::Value hk, mlir::Value j0,
                   mlir::Value cols);

/// The tiled kernel: parallel over (b, h, query tile), online softmax over key tiles.
void emitTiledAttention(KernelBuilder &kb, const AttentionInfo &a, const FlashSchedule &s);

/// The decode kernel: parallel over (b, kv head, key split); each split keeps a partial
/// (max, sum, output) per query row, merged by log-sum-exp afterwards.
void emitDecodeAttention(KernelBuilder &kb, const AttentionInfo &a, const FlashSchedule &s);

} // namespace qkv::ir
