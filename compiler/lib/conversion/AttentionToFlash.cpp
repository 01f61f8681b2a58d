// qkv-lower-attention-to-flash: qkv.attention -> a fused, tiled, vectorized, parallel
// kernel (FlashAttention-2's online softmax). The L x S score matrix never exists: a
// tile of queries stays resident while key/value tiles stream through, with a running
// max and sum per query and one division at the end. The mods are emitted inline,
// vectorized; tiles the mask proves empty are skipped and full ones skip the mask.
//
// Inputs are read through bufferization.to_buffer and the result is a fresh buffer that
// becomes the result tensor (bufferization.to_tensor restrict), as one-shot
// bufferization expects; the loops are scf.parallel (OpenMP after the llvm stage) and
// scf.for, the arithmetic is the vector dialect.
#include "FlashAttention.h"

#include <cmath>
#include <limits>

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/RegionUtils.h"

#include "Microkernel.h"
#include "ModVectorizer.h"
#include "TileClassifier.h"
#include "VectorMath.h"
#include "qkv/compiler/transforms/Passes.h"
#include <qkv/runtime/kernel_abi.hpp>

namespace qkv::ir {
#define GEN_PASS_DEF_LOWERATTENTIONTOFLASH
#include "qkv/compiler/transforms/Passes.h.inc"
} // namespace qkv::ir

using namespace mlir;
using namespace qkv::ir;

namespace qkv::ir {

SmallVector<Value> HeadView::at(KernelBuilder &kb, Value b, Value h, Value row, Value col) const {
  if (table) {
    Value id = kb.load(table, {b, kb.divu(row, pageRows)});
    Value page = arith::IndexCastOp::create(kb.builder(), kb.builder().getIndexType(), id);
    return {page, h, kb.remu(row, pageRows), col};
  }
  SmallVector<Value> idx;
  if (rank == 4)
    idx.push_back(b);
  if (merged) {
    idx.append({row, kb.add(kb.mul(h, headDim), col)});
    return idx;
  }
  if (rank >= 3)
    idx.push_back(h);
  idx.append({row, col});
  return idx;
}

SmallVector<KeySegment> keySegments(KernelBuilder &kb, const AttentionInfo &a, Value b) {
  if (!a.k.cached())
    return {KeySegment{KeySegment::Stored, kb.idx(0), a.nS, Value()}};
  ImplicitLocOpBuilder &ib = kb.builder();
  Value len = arith::IndexCastOp::create(ib, ib.getIndexType(), kb.load(a.k.lengths, {b}));
  Value freshEnd = kb.add(len, a.k.n);
  return {KeySegment{KeySegment::Stored, kb.idx(0), len, Value()},
          KeySegment{KeySegment::Fresh, len, freshEnd, len},
          KeySegment{KeySegment::Zeros, freshEnd, a.nS, Value()}};
}

/// `x` as type `t`: widened (arith.extf) when it is narrower.
static Value widenTo(KernelBuilder &kb, Value x, Type t) {
  return x.getType() == t ? x : arith::ExtFOp::create(kb.builder(), t, x).getResult();
}

/// `t` (a scalar or vector type) with the element type of `v`'s buffer.
static Type asStored(Type t, const HeadView &v) {
  Type elem = cast<MemRefType>(v.mem.getType()).getElementType();
  auto vt = dyn_cast<VectorType>(t);
  return vt ? Type(VectorType::get(vt.getShape(), elem)) : elem;
}

Value unwidened(Value t) {
  auto ext = t.getDefiningOp<arith::ExtFOp>();
  if (!ext)
    return t;
  Type in = getElementTypeOrSelf(ext.getIn().getType());
  return in.isF16() || in.isBF16() ? ext.getIn() : t;
}

Value loadAs(KernelBuilder &kb, Type t, const HeadView &v, ValueRange at, Value mask) {
  Type stored = asStored(t, v);
  Value x = isa<VectorType>(stored) ? kb.vload(cast<VectorType>(stored), v.mem, at, mask)
                                    : kb.load(v.mem, at);
  return widenTo(kb, x, t);
}

Value gatherAs(KernelBuilder &kb, VectorType vt, const HeadView &v, ValueRange at, Value offsets,
               Value mask) {
  auto stored = cast<VectorType>(asStored(vt, v));
  return widenTo(kb, kb.gather(stored, v.mem, at, offsets, mask), vt);
}

/// Where key row `row` of `seg` lies: the view it is read in and its indices there (the
/// fresh rows' view counts from the stored length); nothing in the zeros segment.
static std::optional<std::pair<const HeadView *, SmallVector<Value>>>
segmentAt(KernelBuilder &kb, const RowSource &src, const KeySegment &seg, Value b, Value h,
          Value row, Value col) {
  switch (seg.kind) {
  case KeySegment::Stored: return std::pair{&src.stored, src.stored.at(kb, b, h, row, col)};
  case KeySegment::Fresh:
    return std::pair{&src.fresh, src.fresh.at(kb, b, h, kb.sub(row, seg.len), col)};
  case KeySegment::Zeros: break;
  }
  return std::nullopt;
}

Value readRow(KernelBuilder &kb, Type ft, const RowSource &src, const KeySegment &seg, Value b,
              Value h, Value row, Value col) {
  auto at = segmentAt(kb, src, seg, b, h, row, col);
  return at ? loadAs(kb, ft, *at->first, at->second) : kb.fconst(ft, 0.0);
}

/// A prefetch of the line holding element (b, h, row, col) of `src` for a key row in
/// `seg` (none in the zeros segment): row must be one of the segment's.
void prefetchRow(KernelBuilder &kb, const RowSource &src, const KeySegment &seg, Value b, Value h,
                 Value row, Value col) {
  if (auto at = segmentAt(kb, src, seg, b, h, row, col))
    memref::PrefetchOp::create(kb.builder(), at->first->mem, at->second, /*isWrite=*/false,
                               /*localityHint=*/2, /*isDataCache=*/true);
}

Value readRowVector(KernelBuilder &kb, VectorType vt, const RowSource &src, const KeySegment &seg,
                    Value b, Value h, Value row, Value col, Value mask) {
  auto at = segmentAt(kb, src, seg, b, h, row, col);
  return at ? loadAs(kb, vt, *at->first, at->second, mask) : kb.fconst(vt, 0.0);
}

Value emitScoreAndMask(KernelBuilder &kb, const AttentionInfo &a, Value s, Value b, Value h,
                       Value qi, Value kv, bool withMask, int64_t lanes, bool checksHold) {
  ImplicitLocOpBuilder &ib = kb.builder();
  Type t = s.getType();
  if (a.score) {
    s = emitModRegion(kb, *a.score, {s, b, h, qi, kv, a.nL, a.nS}, a.captures, lanes, checksHold);
    s = arith::MulFOp::create(ib, kb.splat(s, t), kb.fconst(t, M_LOG2E));
  }
  Value ninf = kb.fconst(t, -std::numeric_limits<double>::infinity());
  // A -inf score is masked; a NaN one is kept (unordered-or-not-equal), so that its row's
  // sum and output become NaN, as the interpreter says.
  Value keep = arith::CmpFOp::create(ib, arith::CmpFPredicate::UNE, s, ninf);
  if (withMask && a.mask) {
    Value m = emitModRegion(kb, *a.mask, {b, h, qi, kv, a.nL, a.nS}, a.captures, lanes, checksHold);
    keep = arith::AndIOp::create(ib, keep, kb.splat(m, keep.getType()));
  }
  return arith::SelectOp::create(ib, keep, s, ninf);
}

Value rowOffsets(KernelBuilder &kb, const HeadView &v, int64_t lanes) {
  auto md = memref::ExtractStridedMetadataOp::create(kb.builder(), v.mem);
  // (..., row, col) or, merged, (b, row, h * D + col): the row dim is the second last.
  Value stride = md.getStrides()[md.getStrides().size() - 2];
  auto vt = VectorType::get({lanes}, kb.builder().getIndexType());
  Value step = vector::StepOp::create(kb.builder(), vt);
  return arith::MulIOp::create(kb.builder(), step, kb.splat(stride, vt));
}

SmallVector<Interval> tileRanges(const AttentionInfo &a, Value b, Interval h, Interval q,
                                 Interval kv) {
  return {{b, b}, h, q, kv, {a.nL, a.nL}, {a.nS, a.nS}};
}

/// Queries [i0, i0 + rows) x keys [j0, j0 + cols) of (b, h) as tileRanges.
static SmallVector<Interval> tileRanges(KernelBuilder &kb, const AttentionInfo &a, Value b, Value h,
                                        Value i0, Value rows, Value j0, Value cols) {
  Value one = kb.idx(1);
  Value lastQ = kb.sub(kb.add(i0, rows), one);
  Value lastKv = kb.sub(kb.add(j0, cols), one);
  return tileRanges(a, b, {h, h}, {i0, lastQ}, {j0, lastKv});
}

/// What the mask says about queries [i0, i0 + rows) x keys [j0, j0 + cols) of (b, h).
std::optional<TileClass> classifyKeys(KernelBuilder &kb, const AttentionInfo &a, Value b, Value h,
                                      Value i0, Value rows, Value j0, Value cols) {
  if (!a.mask)
    return std::nullopt;
  return classifyTile(kb, *a.mask, tileRanges(kb, a, b, h, i0, rows, j0, cols), a.captures,
                      a.tables);
}

Value modChecksPass(KernelBuilder &kb, const AttentionInfo &a, Value b, Value h, Value i0,
                    Value rows, Value j0, Value cols, bool withMask) {
  return modChecksPass(kb, a, tileRanges(kb, a, b, h, i0, rows, j0, cols), withMask);
}

Value modChecksPass(KernelBuilder &kb, const AttentionInfo &a, ArrayRef<Interval> ranges,
                    bool withMask) {
  Value all;
  for (auto [mod, first, runs] :
       {std::tuple{a.score, 1u, true}, std::tuple{a.mask, 0u, withMask}}) {
    if (!mod || !runs ||
        !mod->walk([](CheckOp) { return WalkResult::interrupt(); }).wasInterrupted())
      continue;
    Value pass = checksPass(kb, *mod, first, ranges, a.captures, a.tables);
    if (!pass) // this mod's checks cannot be proved for a tile: every element checks
      return {};
    all = all ? arith::AndIOp::create(kb.builder(), all, pass).getResult() : pass;
  }
  return all;
}

} // namespace qkv::ir

namespace {

/// counts[slot] += by (an index or i1), in a task's own buffer.
void bump(KernelBuilder &kb, const TileBuffers &t, int64_t slot, Value by) {
  ImplicitLocOpBuilder &b = kb.builder();
  Value n = by.getType().isInteger(1) ? Value(arith::ExtUIOp::create(b, b.getI64Type(), by))
                                      : Value(arith::IndexCastOp::create(b, b.getI64Type(), by));
  Value at = kb.idx(slot);
  memref::StoreOp::create(b, arith::AddIOp::create(b, memref::LoadOp::create(b, t.counts, at), n),
                          t.counts, at);
}

/// The task's counts added to the op's slots of the global (atomically: tasks run at once).
void publishCounts(KernelBuilder &kb, const AttentionInfo &a, const TileBuffers &t) {
  if (!a.tileCounts)
    return;
  for (int64_t i = 0; i < 3; ++i)
    memref::AtomicRMWOp::create(kb.builder(), arith::AtomicRMWKind::addi,
                                memref::LoadOp::create(kb.builder(), t.counts, kb.idx(i)),
                                a.tileCounts, ValueRange{kb.idx(a.tileSlot + i)});
}


/// qT[d][i] = q[b, h, i0 + i, d] * scale for the tile's rows, 0 past them: each qT row is
/// a column of q gathered lanes rows at a time, in a loop over d (a rolled loop keeps the
/// kernel small, so it compiles fast; it runs once per query tile).
void packQueries(KernelBuilder &kb, const AttentionInfo &a, const FlashSchedule &s,
                 const TileBuffers &t, Value b, Value h, Value i0, Value rows, Value qScale) {
  VectorType vt = kb.vec(a.ft, s.lanes);
  Value lastQ = kb.sub(a.nL, kb.idx(1));
  Value scaleV = kb.splat(qScale, vt);
  Value offsets = rowOffsets(kb, a.q, s.lanes);
  kb.forLoop(kb.idx(0), kb.idx(s.qTile), s.lanes, [&](KernelBuilder &in, Value ib) {
    // The block's first row, in bounds; when it is past the tile, every lane is off.
    Value row = in.min(in.add(i0, ib), lastQ);
    Value valid = in.firstLanes(in.sub(rows, ib), s.lanes);
    in.forLoop(in.idx(0), a.nDh, 1, [&](KernelBuilder &x, Value d) {
      Value v = gatherAs(x, vt, a.q, a.q.at(x, b, h, row, d), offsets, valid);
      x.vstore(arith::MulFOp::create(x.builder(), v, scaleV), t.qT, {d, ib});
    });
  });
}

/// The online-softmax step for one key tile, vectorized over the tile's queries: apply
/// the mods, update the running max, turn scores into probabilities (in place), rescale
/// the running sum.
void tileSoftmax(KernelBuilder &kb, const AttentionInfo &a, const FlashSchedule &s,
                 const TileBuffers &t, Value b, Value h, Value i0, Value j0, Value cols,
                 bool withMask, bool checksHold) {
  VectorType vt = kb.vec(a.ft, s.lanes);
  // The pairs tier's scores are unscaled (its q is never rounded scaled): scaled before a
  // score mod, or else only in the max and in exp2's argument (max commutes with a
  // positive scale), one multiply per query vector instead of one per score. A scale of
  // zero or below (a user's `scale`) does not commute with the max, nor with the mask's
  // -inf (times it, +inf or NaN): those scores are scaled before the mask too.
  Value scaleV = t.scoreScale ? kb.splat(t.scoreScale, vt) : Value();
  bool raw = scaleV && !a.score && a.scalePositive;
  Value ninf = kb.fconst(vt, -std::numeric_limits<double>::infinity());
  Value lastQ = kb.sub(a.nL, kb.idx(1));
  kb.forLoop(kb.idx(0), kb.idx(s.qTile), s.lanes, [&](KernelBuilder &in, Value c) {
    ImplicitLocOpBuilder &ib = in.builder();
    Value mOld = in.vload(vt, t.m, {c});
    Value qi = in.name(in.laneIds(in.add(i0, c), lastQ, s.lanes), "qi");
    Value mx = in.forLoop(
        in.idx(0), cols, in.idx(1), {raw ? ninf : mOld},
        [&](KernelBuilder &in2, Value j, ValueRange acc) {
          Value sc = in2.vload(vt, t.sT, {j, c});
          if (scaleV && !raw)
            sc = arith::MulFOp::create(in2.builder(), sc, scaleV);
          Value kv = in2.name(in2.add(j0, j), "kv");
          sc = emitScoreAndMask(in2, a, sc, b, h, qi, kv, withMask, s.lanes, checksHold);
          in2.vstore(sc, t.sT, {j, c});
          // Scores are never NaN here: a compare and select is
          // one vmaxps, where maximumf would also propagate NaN.
          ImplicitLocOpBuilder &b2 = in2.builder();
          Value gt = arith::CmpFOp::create(b2, arith::CmpFPredicate::OGT, sc, acc[0]);
          return SmallVector<Value>{arith::SelectOp::create(b2, gt, sc, acc[0])};
        })[0];
    if (raw) { // the tile's raw max, scaled, against the running max
      Value scaled = arith::MulFOp::create(ib, mx, scaleV);
      Value gt = arith::CmpFOp::create(ib, arith::CmpFPredicate::OGT, scaled, mOld);
      mx = arith::SelectOp::create(ib, gt, scaled, mOld);
    }
    // A row with nothing kept so far has max -inf: subtract 0 instead, so exp2 gives 0.
    Value none = arith::CmpFOp::create(ib, arith::CmpFPredicate::OEQ, mx, ninf);
    Value mUse = arith::SelectOp::create(ib, none, in.fconst(vt, 0.0), mx);
    Value corr = emitExp2(in, arith::SubFOp::create(ib, mOld, mUse));
    in.vstore(mx, t.m, {c});
    in.vstore(corr, t.corr, {c});
    Value sum = s.dot ? probabilityPairs(in, s, t, c, cols, mUse, raw ? scaleV : Value()) :
                in.forLoop(in.idx(0), cols, in.idx(1), {in.fconst(vt, 0.0)},
                           [&](KernelBuilder &in2, Value j, ValueRange acc) {
                             ImplicitLocOpBuilder &b2 = in2.builder();
                             Value sc = in2.vload(vt, t.sT, {j, c});
                             Value p = emitExp2(in2, arith::SubFOp::create(b2, sc, mUse));
                             in2.vstore(p, t.sT, {j, c});
                             return SmallVector<Value>{arith::AddFOp::create(b2, acc[0], p)};
                           })[0];
    Value l = in.vload(vt, t.l, {c});
    in.vstore(math::FmaOp::create(ib, l, corr, sum), t.l, {c});
  });
}

/// Rows of the f32 products' register tiles: gemmRowsFor's, or with tiles of one vector of
/// queries (FlashSchedule::prefetch) up to 16, so that each step's loop and prefetch are
/// shared by more FMAs.
int64_t productRows(const FlashSchedule &s) {
  int64_t nc = s.qTile / s.lanes;
  if (s.prefetch && nc == 1)
    return std::min<int64_t>(16, s.registers - 3);
  return gemmRowsFor(nc, s.registers);
}

/// Whether `src` is stored in a narrower float type than `ft` (the f32 tier's bf16 and f16
/// keys and values; a cache view's fresh rows have its storage's dtype).
bool storedNarrower(const RowSource &src, Type ft) {
  return cast<MemRefType>(src.stored.mem.getType()).getElementType() != ft;
}

/// w[r][d] = the row j0 + r of `src` (a segment's keys or values), widened to ft, for
/// r < cols and d < D: whole vectors while they fit, the rest element by element. Each
/// stored element is widened once per tile instead of once per register tile reading it.
void widenTile(KernelBuilder &kb, const AttentionInfo &a, const FlashSchedule &s, Value w,
               const RowSource &src, Value D, const KeySegment &seg, Value b, Value hk, Value j0,
               Value cols) {
  VectorType vt = kb.vec(a.ft, s.lanes);
  Value whole = kb.mul(kb.divu(D, kb.idx(s.lanes)), s.lanes);
  kb.forLoop(kb.idx(0), cols, 1, [&](KernelBuilder &in, Value r) {
    Value row = in.add(j0, r);
    in.forLoop(in.idx(0), whole, s.lanes, [&](KernelBuilder &x, Value d) {
      x.vstore(readRowVector(x, vt, src, seg, b, hk, row, d, Value()), w, {r, d});
    });
    in.forLoop(whole, D, 1, [&](KernelBuilder &x, Value d) {
      x.store(readRow(x, a.ft, src, seg, b, hk, row, d), w, {r, d});
    });
  });
}

/// sT[j][i] = sum_d K[b, hk, j0 + j, d] * qT[d][i] for j < cols (K's rows read from t.kvW
/// when t.widenK: keyTile widened them there) (`cols` is the whole
/// key tile when `fullTile`: then the last register tile is one exact block).
void tileScoresF(KernelBuilder &kb, const AttentionInfo &a, const FlashSchedule &s,
                 const TileBuffers &t, const KeySegment &seg, Value b, Value hk, Value j0,
                 Value cols, bool fullTile) {
  GemmSpec g;
  g.elem = a.ft;
  g.lanes = s.lanes;
  g.nc = s.qTile / s.lanes;
  g.mr = productRows(s);
  g.M = cols;
  if (fullTile)
    g.staticM = s.kvTile;
  g.K = a.nDh;
  VectorType vt = kb.vec(a.ft, s.lanes);
  g.a = [&](KernelBuilder &in, Value i, Value k) {
    return t.widenK ? in.load(t.kvW, {i, k}) : readRow(in, a.ft, a.k, seg, b, hk, in.add(j0, i), k);
  };
  g.b = [&](KernelBuilder &in, Value k, int64_t c) {
    return in.vload(vt, t.qT, {k, in.idx(c * s.lanes)});
  };
  g.init = [&](KernelBuilder &in, Value, int64_t) { return in.fconst(vt, 0.0); };
  g.store = [&](KernelBuilder &in, Value i, int64_t c, Value v) {
    in.vstore(v, t.sT, {i, in.idx(c * s.lanes)});
  };
  // The register tile's value rows, for tileValuesF: its mr rows' lines (lv each) one a
  // step, k taken modulo their number.
  if (s.prefetch && a.staticDv) {
    int64_t lv = (*a.staticDv + s.lanes - 1) / s.lanes, lines = g.mr * lv;
    Value last = kb.sub(cols, kb.idx(1));
    g.prefetch = [&, lv, lines, last](KernelBuilder &in, Value i0, Value k) {
      Value n = in.remu(k, in.idx(lines));
      Value row = in.add(j0, in.min(in.add(i0, in.divu(n, in.idx(lv))), last));
      Value col = in.mul(in.remu(n, in.idx(lv)), s.lanes);
      prefetchRow(in, a.v, seg, b, hk, row, col);
    };
  }
  emitGemm(kb, g);
}

/// oT[d][i] = oT[d][i] * corr[i] + sum_j V[b, hk, j0 + j, d] * sT[j][i] for d < Dv.
void tileValuesF(KernelBuilder &kb, const AttentionInfo &a, const FlashSchedule &s,
                 const TileBuffers &t, const KeySegment &seg, Value b, Value hk, Value j0,
                 Value cols) {
  GemmSpec g;
  g.elem = a.ft;
  g.lanes = s.lanes;
  g.nc = s.qTile / s.lanes;
  g.mr = productRows(s);
  // A static Dv in whole register tiles: the largest row count down to 4 that divides it
  // saves compiling a last, shorter tile (Dv = 64 with 6-row tiles ended in a 4-row one).
  if (a.staticDv)
    for (int64_t r = g.mr; r >= 4; --r)
      if (*a.staticDv % r == 0) {
        g.mr = r;
        break;
      }
  g.M = a.nDv;
  g.staticM = a.staticDv;
  g.K = cols;
  VectorType vt = kb.vec(a.ft, s.lanes);
  SmallVector<Value> corr;
  for (int64_t c = 0; c < g.nc; ++c)
    corr.push_back(kb.vload(vt, t.corr, {kb.idx(c * s.lanes)}));
  if (t.widenV)
    widenTile(kb, a, s, t.kvW, a.v, a.nDv, seg, b, hk, j0, cols);
  g.a = [&](KernelBuilder &in, Value i, Value k) {
    return t.widenV ? in.load(t.kvW, {k, i}) : readRow(in, a.ft, a.v, seg, b, hk, in.add(j0, k), i);
  };
  g.b = [&](KernelBuilder &in, Value k, int64_t c) {
    return in.vload(vt, t.sT, {k, in.idx(c * s.lanes)});
  };
  g.init = [&](KernelBuilder &in, Value i, int64_t c) {
    Value o = in.vload(vt, t.oT, {i, in.idx(c * s.lanes)});
    return arith::MulFOp::create(in.builder(), o, corr[c]).getResult();
  };
  g.store = [&](KernelBuilder &in, Value i, int64_t c, Value v) {
    in.vstore(v, t.oT, {i, in.idx(c * s.lanes)});
  };
  // The next key tile's rows, for the next tileScoresF: step k of the register tile over
  // head dims [i0, i0 + mr) takes one line of key j0 + kvTile + k (the segment's last key
  // past its end), the tile's index (modulo the lines of a key row) choosing which line.
  if (s.prefetch) {
    Value lk = kb.ceilDiv(a.nDh, s.lanes), last = kb.sub(seg.end, kb.idx(1));
    Value next = kb.add(j0, kb.idx(s.kvTile));
    g.prefetch = [&, lk, last, next](KernelBuilder &in, Value i0, Value k) {
      Value line = in.remu(in.divu(i0, in.idx(g.mr)), lk);
      Value row = in.min(in.add(next, k), last);
      prefetchRow(in, a.k, seg, b, hk, row, in.mul(line, s.lanes));
    };
  }
  emitGemm(kb, g);
}

Value notI1(KernelBuilder &kb, Value v) {
  ImplicitLocOpBuilder &b = kb.builder();
  return arith::XOrIOp::create(b, v, arith::ConstantOp::create(b, b.getBoolAttr(true)));
}

/// The key tile starting at j0 of a segment: skipped when the mask proves it empty,
/// without mask code when full.
void keyTile(KernelBuilder &kb, const AttentionInfo &a, const FlashSchedule &s,
             const TileBuffers &t, const KeySegment &seg, Value b, Value h, Value hk, Value i0,
             Value rows, Value j0) {
  Value cols = kb.min(kb.idx(s.kvTile), kb.sub(seg.end, j0));
  auto tileScores = s.dot ? tileScorePairs : tileScoresF;
  auto tileValues = s.dot ? tileValuePairs : tileValuesF;
  // A checked mod runs without its checks in the tiles whose positions prove they pass.
  auto tileSoftmax = [&](KernelBuilder &x, bool withMask) {
    Value pass = modChecksPass(x, a, b, h, i0, rows, j0, cols, withMask);
    auto run = [&](bool hold) {
      return [&, hold](KernelBuilder &y) {
        ::tileSoftmax(y, a, s, t, b, h, i0, j0, cols, withMask, hold);
      };
    };
    if (pass)
      x.ifThen(pass, run(true), run(false));
    else
      run(false)(x);
  };
  auto work = [&](KernelBuilder &in, std::optional<Value> full) {
    // Every key tile but a segment's last has kv-tile keys: a static count lets the score
    // kernel end in one exact register tile when kv-tile is not a multiple of its rows.
    // Widened once, before the choice of score kernel (each would widen it again).
    if (t.widenK)
      widenTile(in, a, s, t.kvW, a.k, a.nDh, seg, b, hk, j0, cols);
    if (s.amx)
      tileScoresAmx(in, a, s, t, b, hk, j0, cols);
    else if (s.kvTile % productRows(s) == 0)
      tileScores(in, a, s, t, seg, b, hk, j0, cols, false);
    else
      in.ifThen(
          in.cmp(arith::CmpIPredicate::eq, cols, in.idx(s.kvTile)),
          [&](KernelBuilder &x) { tileScores(x, a, s, t, seg, b, hk, j0, cols, true); },
          [&](KernelBuilder &x) { tileScores(x, a, s, t, seg, b, hk, j0, cols, false); });
    if (full)
      in.ifThen(
          *full, [&](KernelBuilder &x) { tileSoftmax(x, false); },
          [&](KernelBuilder &x) { tileSoftmax(x, true); });
    else
      tileSoftmax(in, a.mask != nullptr);
    if (s.amx)
      tileValuesAmx(in, a, s, t, b, hk, j0, cols);
    else
      tileValues(in, a, s, t, seg, b, hk, j0, cols);
    bump(in, t, 1, in.idx(1));
    if (full)
      bump(in, t, 2, *full);
    else if (!a.mask)
      bump(in, t, 2, in.idx(1));
  };
  std::optional<TileClass> cls = classifyKeys(kb, a, b, h, i0, rows, j0, cols);
  if (!cls) {
    work(kb, std::nullopt);
    return;
  }
  kb.ifThen(notI1(kb, cls->empty), [&](KernelBuilder &in) { work(in, cls->full); });
}

/// The key tiles of one segment of a query tile. With a mask, groups of 8 tiles are
/// classified first, so a sliding window over a long sequence (or the unused rows of a
/// cache) skips most of them with one test per group instead of one per tile.
void segmentTiles(KernelBuilder &kb, const AttentionInfo &a, const FlashSchedule &s,
                  const TileBuffers &t, const KeySegment &seg, Value b, Value h, Value hk, Value i0,
                  Value rows) {
  Value nKT = kb.ceilDiv(kb.max(kb.sub(seg.end, seg.begin), kb.idx(0)), s.kvTile);
  bump(kb, t, 0, nKT);
  auto tiles = [&](KernelBuilder &in, Value from, Value to) {
    in.forLoop(from, to, 1, [&](KernelBuilder &x, Value kt) {
      x.name(kt, "kv_tile");
      keyTile(x, a, s, t, seg, b, h, hk, i0, rows, x.add(seg.begin, x.mul(kt, s.kvTile)));
    });
  };
  if (!a.mask)
    return tiles(kb, kb.idx(0), nKT);
  constexpr int64_t group = 8;
  kb.forLoop(kb.idx(0), kb.ceilDiv(nKT, group), 1, [&](KernelBuilder &in, Value kg) {
    Value from = in.mul(kg, group), to = in.min(nKT, in.add(from, group));
    Value j0 = in.add(seg.begin, in.mul(from, s.kvTile));
    Value cols = in.min(in.idx(group * s.kvTile), in.sub(seg.end, j0));
    std::optional<TileClass> cls = classifyKeys(in, a, b, h, i0, rows, j0, cols);
    if (!cls)
      return tiles(in, from, to);
    in.ifThen(notI1(in, cls->empty), [&](KernelBuilder &x) { tiles(x, from, to); });
  });
}

/// Every key of a query tile, segment by segment.
void keyTiles(KernelBuilder &kb, const AttentionInfo &a, const FlashSchedule &s,
              const TileBuffers &t, Value b, Value h, Value hk, Value i0, Value rows) {
  for (const KeySegment &seg : keySegments(kb, a, b))
    segmentTiles(kb, a, s, t, seg, b, h, hk, i0, rows);
}

/// out[b, h, i0 + i, d] = oT[d][i] / l[i] (0 for a row that kept nothing): each oT row
/// scattered into a column of the output, lanes rows at a time.
void writeTile(KernelBuilder &kb, const AttentionInfo &a, const FlashSchedule &s,
               const TileBuffers &t, Value b, Value h, Value i0, Value rows) {
  VectorType vt = kb.vec(a.ft, s.lanes);
  Value lastQ = kb.sub(a.nL, kb.idx(1));
  Value offsets = rowOffsets(kb, a.out, s.lanes);
  kb.forLoop(kb.idx(0), kb.idx(s.qTile), s.lanes, [&](KernelBuilder &in, Value ib) {
    ImplicitLocOpBuilder &ib2 = in.builder();
    Value l = in.vload(vt, t.l, {ib});
    // l > 0, or NaN (a kept NaN score): 1 / NaN carries it to the row's output.
    Value any = arith::CmpFOp::create(ib2, arith::CmpFPredicate::UGT, l, in.fconst(vt, 0.0));
    Value inv = arith::SelectOp::create(ib2, any, arith::DivFOp::create(ib2, in.fconst(vt, 1.0), l),
                                        in.fconst(vt, 0.0));
    Value row = in.min(in.add(i0, ib), lastQ);
    Value written = in.firstLanes(in.sub(rows, ib), s.lanes);
    in.forLoop(in.idx(0), a.nDv, 1, [&](KernelBuilder &x, Value d) {
      Value o = arith::MulFOp::create(x.builder(), x.vload(vt, t.oT, {d, ib}), inv);
      x.scatter(o, a.out.mem, a.out.at(x, b, h, row, d), offsets, written);
    });
    if (a.lse) // the rows are consecutive in the log-sum-exp's buffer
      in.vstore(rowLse(in, in.vload(vt, t.m, {ib}), l), a.lse, lseAt(a, b, h, row), written);
  });
}

TileBuffers allocTileBuffers(KernelBuilder &kb, const AttentionInfo &a, const FlashSchedule &s,
                             const AmxOperands &amx) {
  auto dimOf = [&](Value v, std::optional<int64_t> stat) -> std::pair<int64_t, SmallVector<Value>> {
    if (stat)
      return {*stat, {}};
    return {ShapedType::kDynamic, {v}};
  };
  auto [dh, dhDyn] = dimOf(a.nDh, a.staticDh);
  auto [dv, dvDyn] = dimOf(a.nDv, a.staticDv);
  Type bf16 = kb.builder().getBF16Type();
  TileBuffers t;
  t.amx = amx;
  if (s.amx) { // whole tiles of 32 head dims (16 pairs), whole blocks of 32 value dims
    auto rounded = [](std::optional<int64_t> n) -> std::optional<int64_t> {
      if (n)
        return (*n + 31) / 32 * 32;
      return std::nullopt;
    };
    std::optional<int64_t> dhr = rounded(a.staticDh), dvr = rounded(a.staticDv);
    auto [dhp, dhpDyn] = dimOf(kb.divu(amx.dh, kb.idx(2)), dhr ? std::optional<int64_t>(*dhr / 2) : std::nullopt);
    auto [dvw, dvwDyn] = dimOf(amx.dv, dvr);
    t.qT = kb.stackBuffer(bf16, {dhp, 2 * s.qTile}, dhpDyn);
    t.sT = kb.stackBuffer(a.ft, {s.kvTile, s.qTile}, {});
    t.oT = kb.stackBuffer(a.ft, {dvw, s.qTile}, dvwDyn);
    t.pT = kb.stackBuffer(bf16, {s.kvTile / 2, 2 * s.qTile}, {});
  } else if (!s.dot) {
    t.qT = kb.stackBuffer(a.ft, {dh, s.qTile}, dhDyn);
  } else { // pairs of head dims, bf16
    std::optional<int64_t> pairs;
    if (a.staticDh)
      pairs = (*a.staticDh + 1) / 2;
    auto [dhp, dhpDyn] = dimOf(kb.ceilDiv(a.nDh, 2), pairs);
    t.qT = kb.stackBuffer(bf16, {dhp, 2 * s.qTile}, dhpDyn);
  }
  if (!s.amx) {
    t.sT = kb.stackBuffer(a.ft, {s.kvTile, s.qTile}, {});
    t.oT = kb.stackBuffer(a.ft, {dv, s.qTile}, dvDyn);
  }
  if (!s.dot) {
    t.widenK = storedNarrower(a.k, a.ft);
    t.widenV = storedNarrower(a.v, a.ft);
  }
  if (t.widenK || t.widenV) {
    std::optional<int64_t> widest;
    if (a.staticDh && a.staticDv)
      widest = std::max(*a.staticDh, *a.staticDv);
    auto [dw, dwDyn] = dimOf(kb.max(a.nDh, a.nDv), widest);
    t.kvW = kb.stackBuffer(a.ft, {s.kvTile, dw}, dwDyn);
  }
  t.m = kb.stackBuffer(a.ft, {s.qTile}, {});
  t.l = kb.stackBuffer(a.ft, {s.qTile}, {});
  t.corr = kb.stackBuffer(a.ft, {s.qTile}, {});
  t.counts = kb.stackBuffer(kb.builder().getI64Type(), {3}, {});
  if (!s.dot || s.amx)
    return t;
  // Pairs of keys (pT, vP); vP's rows whole vectors of Dv.
  int64_t keyPairs = (s.kvTile + 1) / 2;
  std::optional<int64_t> dvWhole;
  if (a.staticDv)
    dvWhole = 2 * ((*a.staticDv + s.lanes - 1) / s.lanes * s.lanes);
  auto [dvp, dvpDyn] = dimOf(kb.mul(kb.mul(kb.ceilDiv(a.nDv, s.lanes), s.lanes), 2), dvWhole);
  t.pT = kb.stackBuffer(bf16, {keyPairs, 2 * s.qTile}, {});
  t.vP = kb.stackBuffer(bf16, {keyPairs, dvp}, dvpDyn);
  return t;
}

/// Running state at the start of a query tile: m = -inf, l = 0, oT = 0.
void initTile(KernelBuilder &kb, const AttentionInfo &a, const FlashSchedule &s,
              const TileBuffers &t) {
  VectorType vt = kb.vec(a.ft, s.lanes);
  Value zero = kb.fconst(vt, 0.0);
  Value ninf = kb.fconst(vt, -std::numeric_limits<double>::infinity());
  Value none = arith::ConstantIntOp::create(kb.builder(), kb.builder().getI64Type(), 0);
  for (int64_t i = 0; i < 3; ++i)
    memref::StoreOp::create(kb.builder(), none, t.counts, ValueRange{kb.idx(i)});
  kb.forLoop(kb.idx(0), kb.idx(s.qTile), s.lanes, [&](KernelBuilder &in, Value c) {
    in.vstore(ninf, t.m, {c});
    in.vstore(zero, t.l, {c});
    // On AMX every row the tiles cover, Dv's padding too.
    in.forLoop(in.idx(0), s.amx ? t.amx.dv : a.nDv, 1, [&](KernelBuilder &in2, Value d) {
      in2.vstore(zero, t.oT, {d, c});
    });
  });
}

} // namespace

namespace qkv::ir {

void emitTiledAttention(KernelBuilder &kb, const AttentionInfo &a, const FlashSchedule &s) {
  // The AMX form packs K and V once per call (an operand's rows, or a cache view's segments
  // and pages), before the query tiles.
  AmxOperands amx;
  if (s.amx)
    amx = packForAmx(kb, a, s);
  Value nQT = kb.ceilDiv(a.nL, s.qTile);
  // Without a score mod, log2(e) joins the scale in q, so scores come out in log2 units.
  Value qScale =
      a.score ? a.scale
              : Value(arith::MulFOp::create(kb.builder(), a.scale, kb.fconst(a.ft, M_LOG2E)));
  kb.parallel({a.nB, a.nH, nQT}, [&](KernelBuilder &in, ValueRange iv) {
    Value b = in.name(iv[0], "b"), h = in.name(iv[1], "h"), hk = in.divu(h, a.group);
    Value i0 = in.mul(in.name(iv[2], "q_tile"), s.qTile);
    Value rows = in.min(in.idx(s.qTile), in.sub(a.nL, i0));
    TileBuffers t = allocTileBuffers(in, a, s, amx);
    if (s.dot) {
      packQueryPairs(in, a, s, t, b, h, i0, rows);
      if (s.amx)
        zeroQueryPadAmx(in, a, s, t);
      t.scoreScale = qScale;
    } else {
      packQueries(in, a, s, t, b, h, i0, rows, qScale);
    }
    initTile(in, a, s, t);
    keyTiles(in, a, s, t, b, h, hk, i0, rows);
    writeTile(in, a, s, t, b, h, i0, rows);
    publishCounts(in, a, t);
  });
  if (s.amx)
    freeAmxOperands(kb, amx);
}

} // namespace qkv::ir

namespace {

Value readBuffer(ImplicitLocOpBuilder &b, Value t, bool identity) {
  auto tt = cast<RankedTensorType>(t.getType());
  MemRefLayoutAttrInterface layout;
  if (!identity) {
    // Any offset and strides, but unit stride along the last dim.
    SmallVector<int64_t> strides(tt.getRank(), ShapedType::kDynamic);
    if (tt.getRank() > 0)
      strides.back() = 1;
    layout = StridedLayoutAttr::get(b.getContext(), ShapedType::kDynamic, strides);
  }
  auto mt = MemRefType::get(tt.getShape(), tt.getElementType(), layout);
  return bufferization::ToBufferOp::create(b, mt, t, /*read_only=*/true);
}

/// Extent d of an attention operand. An operand made by qkv.split_heads is measured on
/// the split's input, which the kernel reads in place: asking the split itself would
/// keep it (and the copy it lowers to) alive.
Value sizeOf(ImplicitLocOpBuilder &b, Value t, int64_t d) {
  auto tt = cast<RankedTensorType>(t.getType());
  if (!tt.isDynamicDim(d))
    return arith::ConstantIndexOp::create(b, tt.getDimSize(d));
  if (auto split = t.getDefiningOp<SplitHeadsOp>()) {
    // (..., L, H*D) -> (..., H, L, D): H is static.
    Value x = split.getX();
    int64_t r = tt.getRank();
    auto dimOfX = [&](int64_t i) { return Value(tensor::DimOp::create(b, x, i)); };
    if (d == r - 1)
      return arith::DivUIOp::create(b, dimOfX(r - 2),
                                    arith::ConstantIndexOp::create(b, split.getHeads()));
    return dimOfX(d == r - 2 ? r - 3 : d);
  }
  // A cache view (B, Hkv, rows + n, Dh): measured on its parts, which the kernel reads.
  if (auto view = t.getDefiningOp<CacheViewOp>()) {
    if (d != 2)
      return sizeOf(b, view.getFresh(), d);
    return arith::AddIOp::create(b, sizeOf(b, view.getPast(), 2), sizeOf(b, view.getFresh(), 2));
  }
  if (auto view = t.getDefiningOp<PagedCacheViewOp>()) {
    if (d != 2)
      return sizeOf(b, view.getFresh(), d);
    Value rows =
        arith::MulIOp::create(b, sizeOf(b, view.getTable(), 1), sizeOf(b, view.getPool(), 2));
    return arith::AddIOp::create(b, rows, sizeOf(b, view.getFresh(), 2));
  }
  return tensor::DimOp::create(b, t, d);
}

/// An operand read in place: through the qkv.split_heads that produced it when there is
/// one (the kernel then reads the unsplit tensor), else as it is.
HeadView viewOf(ImplicitLocOpBuilder &b, Value t, int64_t rank, Value headDim) {
  HeadView v;
  v.rank = rank;
  if (auto split = t.getDefiningOp<SplitHeadsOp>()) {
    v.mem = readBuffer(b, split.getX(), false);
    v.merged = true;
    v.headDim = headDim;
    return v;
  }
  v.mem = readBuffer(b, t, false);
  return v;
}

/// Key or value rows: a plain operand, or the parts of a cache view.
RowSource rowsOf(ImplicitLocOpBuilder &b, Value t, int64_t rank, Value headDim) {
  RowSource src;
  auto parts = [&](Value store, Value lengths, Value fresh) {
    src.stored.mem = readBuffer(b, store, false);
    src.fresh = viewOf(b, fresh, rank, headDim);
    src.lengths = readBuffer(b, lengths, true);
    src.n = sizeOf(b, fresh, 2);
  };
  if (auto view = t.getDefiningOp<CacheViewOp>()) {
    parts(view.getPast(), view.getLengths(), view.getFresh());
  } else if (auto view = t.getDefiningOp<PagedCacheViewOp>()) {
    parts(view.getPool(), view.getLengths(), view.getFresh());
    src.stored.table = readBuffer(b, view.getTable(), true);
    src.stored.pageRows = sizeOf(b, view.getPool(), 2);
  } else {
    src.stored = viewOf(b, t, rank, headDim);
  }
  return src;
}

/// The output buffer: in the (..., L, H*Dv) layout of the qkv.merge_heads that is the
/// result's only user, when there is one, else the result's own shape.
/// A fresh buffer for op's log-sum-exp, sized like q's leading dims (null without one).
Value lseBuffer(ImplicitLocOpBuilder &b, AttentionOp op, Type ft) {
  if (!op.getLse())
    return {};
  auto t = cast<RankedTensorType>(op.getLse().getType());
  SmallVector<Value> dyn;
  for (int64_t i = 0; i < t.getRank(); ++i)
    if (t.isDynamicDim(i))
      dyn.push_back(sizeOf(b, unwidened(op.getQ()), i));
  return memref::AllocOp::create(b, MemRefType::get(t.getShape(), ft), dyn);
}

HeadView outputOf(KernelBuilder &kb, AttentionOp op, const AttentionInfo &a) {
  ImplicitLocOpBuilder &b = kb.builder();
  HeadView v;
  v.rank = a.rank;
  Value res = op.getResult();
  auto merge = res.hasOneUse() ? dyn_cast<MergeHeadsOp>(*res.getUsers().begin()) : MergeHeadsOp();
  auto outT = cast<RankedTensorType>(merge ? merge.getType() : res.getType());
  SmallVector<Value> dyn;
  for (int64_t i = 0; i < outT.getRank(); ++i) {
    if (!outT.isDynamicDim(i))
      continue;
    if (!merge)
      dyn.push_back(i == a.rank - 1 ? a.nDv : sizeOf(b, unwidened(op.getQ()), i));
    else // (..., L, H*Dv): leading dims and L from q, the last from H*Dv
      dyn.push_back(i == outT.getRank() - 1
                        ? kb.mul(a.nH, a.nDv)
                        : sizeOf(b, unwidened(op.getQ()),
                                 i == outT.getRank() - 2 ? a.rank - 2 : i));
  }
  v.mem = memref::AllocOp::create(b, MemRefType::get(outT.getShape(), a.ft), dyn);
  v.merged = bool(merge);
  v.headDim = a.nDv;
  return v;
}

} // namespace

namespace qkv::ir {

AttentionInfo describe(KernelBuilder &kb, AttentionOp op) {
  ImplicitLocOpBuilder &b = kb.builder();
  AttentionInfo a;
  a.op = op;
  // An operand the import widened from f16/bf16 is read where its own tensor is (loadAs).
  Value q = unwidened(op.getQ()), k = unwidened(op.getK()), v = unwidened(op.getV());
  auto qt = cast<RankedTensorType>(op.getQ().getType());
  a.rank = qt.getRank();
  a.ft = qt.getElementType();
  int64_t r = a.rank;
  Value one = kb.idx(1);
  a.nB = r == 4 ? sizeOf(b, q, 0) : one;
  a.nH = r >= 3 ? sizeOf(b, q, r - 3) : one;
  a.nHk = r >= 3 ? sizeOf(b, k, r - 3) : one;
  a.nL = sizeOf(b, q, r - 2);
  a.nS = sizeOf(b, k, r - 2);
  a.nDh = sizeOf(b, q, r - 1);
  a.nDv = sizeOf(b, v, r - 1);
  a.group = kb.divu(a.nH, a.nHk);
  auto staticOf = [](Value t, int64_t d) -> std::optional<int64_t> {
    int64_t n = cast<RankedTensorType>(t.getType()).getDimSize(d);
    return ShapedType::isDynamic(n) ? std::nullopt : std::optional<int64_t>(n);
  };
  a.staticDh = staticOf(q, r - 1);
  a.staticDv = staticOf(v, r - 1);
  if (auto s = op.getScale()) {
    a.scale = kb.fconst(a.ft, s->convertToDouble());
    a.scalePositive = s->convertToDouble() > 0;
  } else
    a.scale = arith::DivFOp::create(
        b, kb.fconst(a.ft, 1.0),
        math::SqrtOp::create(
            b, arith::SIToFPOp::create(b, a.ft,
                                       arith::IndexCastOp::create(b, b.getI64Type(), a.nDh))));
  a.q = viewOf(b, q, r, a.nDh);
  a.k = rowsOf(b, k, r, a.nDh);
  a.v = rowsOf(b, v, r, a.nDv);
  // Keys and values must be views of the same lengths to share the segments; otherwise
  // both are read as plain operands (the views then materialise).
  auto lengthsOf = [](Value t) -> Value {
    if (auto view = t.getDefiningOp<CacheViewOp>())
      return view.getLengths();
    if (auto view = t.getDefiningOp<PagedCacheViewOp>())
      return view.getLengths();
    return Value();
  };
  if (lengthsOf(k) != lengthsOf(v))
    a.k.lengths = a.v.lengths = Value();
  if (!a.k.cached()) {
    a.k.stored = viewOf(b, k, r, a.nDh);
    a.v.stored = viewOf(b, v, r, a.nDv);
  }
  for (Value c : op.getCaptures())
    a.captures.push_back(readBuffer(b, c, true));
  if (!op.getScore().empty())
    a.score = &op.getScore();
  if (!op.getMask().empty())
    a.mask = &op.getMask();
  a.out = outputOf(kb, op, a);
  a.lse = lseBuffer(b, op, a.ft);
  return a;
}

SmallVector<Value> lseAt(const AttentionInfo &a, Value b, Value h, Value row) {
  if (a.rank == 4)
    return {b, h, row};
  if (a.rank == 3)
    return {h, row};
  return {row};
}

Value rowLse(KernelBuilder &kb, Value m, Value l) {
  ImplicitLocOpBuilder &b = kb.builder();
  Value log2l = math::Log2Op::create(b, l);
  return arith::MulFOp::create(b, arith::AddFOp::create(b, m, log2l),
                               kb.fconst(m.getType(), M_LN2));
}

void replaceWithOutput(PatternRewriter &rw, ImplicitLocOpBuilder &ib, AttentionOp op,
                       const AttentionInfo &a) {
  auto asTensor = [&](Value mem) -> Value {
    auto t = cast<MemRefType>(mem.getType());
    return bufferization::ToTensorOp::create(ib, RankedTensorType::get(t.getShape(), a.ft), mem,
                                             /*restrict=*/true, /*writable=*/true);
  };
  Value res = asTensor(a.out.mem);
  SmallVector<Value> results{res};
  if (a.lse)
    results.push_back(asTensor(a.lse));
  if (a.out.merged) { // the kernel wrote the merge_heads result itself
    Operation *merge = *op.getResult().getUsers().begin();
    rw.replaceOp(merge, res);
    results[0] = Value();
    if (a.lse)
      rw.replaceAllUsesWith(op.getLse(), results[1]);
    rw.eraseOp(op);
  } else {
    rw.replaceOp(op, results);
  }
}

} // namespace qkv::ir

namespace {

/// Keys per tile of the small query tiles a dynamic query length gets (variantsOf).
constexpr int64_t kSmallQueryTileKeys = 256;

struct FlashOptions {
  int64_t vectorBits, qTile, kvTile, decodeRows;
  bool bf16Pairs; // the avx512bf16 and amx tiers
  bool amx;       // the amx tier
};

/// The AMX form for a pairs schedule on the amx tier (FlashSchedule::amx): 16-lane vectors
/// and query tiles of whole blocks of 32; a default key tile is cut to whole blocks of 32
/// (66 keys for 64 queries becomes 64), a key tile the options set must be one already.
void chooseAmx(FlashSchedule &s, const FlashOptions &o) {
  if (!s.dot || !o.amx || s.lanes != 16 || s.qTile % 32 != 0)
    return;
  if (o.kvTile == 0 && s.kvTile % 32 != 0)
    s.kvTile = std::max<int64_t>(32, s.kvTile / 32 * 32);
  s.amx = s.kvTile % 32 == 0;
}

/// Whether `op`'s tiled kernel multiplies bf16 pairs: on the avx512bf16 and amx tiers, when q, k
/// and v are bf16 (read where they are) and it computes in f32.
bool onPairs(AttentionOp op, const FlashOptions &o) {
  auto bf16 = [](Value t) { return getElementTypeOrSelf(unwidened(t).getType()).isBF16(); };
  return o.bf16Pairs && getElementTypeOrSelf(op.getQ().getType()).isF32() && bf16(op.getQ()) &&
         bf16(op.getK()) && bf16(op.getV());
}

FlashSchedule resolveSchedule(const FlashOptions &o, Type ft, bool masked) {
  FlashSchedule s;
  int64_t bits = ft.getIntOrFloatBitWidth();
  s.lanes = std::max<int64_t>(1, o.vectorBits / bits);
  s.registers = o.vectorBits >= 512 ? 32 : 16;
  // Tiles of 4 vectors of queries; 2 with a mask, whose partial tiles (a window's two
  // edges, a causal diagonal) waste about half a tile per query row. Measured with 2
  // threads, f32, Dh=64: a 256-key window at L=8192 runs 7% faster with 32x32 tiles
  // than with 64x64, a causal mask at L=2048 about 2% slower, no mask 2% slower.
  s.qTile = o.qTile > 0 ? o.qTile : (masked ? 2 : 4) * s.lanes;
  s.qTile = std::max(s.lanes, s.qTile / s.lanes * s.lanes);
  // With a mask, key tiles as long as query tiles: diagonal tiles then waste the least
  // (measured: the causal/no-mask time ratio is 0.53 with 64/64, 0.55 with 64/96).
  // Without one, the query tile rounded up to whole register tiles of the score kernel
  // (66 keys for 64 queries of f32 on AVX-512, whose tiles have 6 rows): every key tile
  // but the last is then whole register tiles, and the kernel needs no second copy of
  // the score micro-kernel ending in a short block (a quarter less code to compile, the
  // same speed: attn at L=2048 ran at 84% of peak with 64, 60 and 66 keys).
  int64_t rows = gemmRowsFor(s.qTile / s.lanes, s.registers);
  s.kvTile = o.kvTile > 0 ? o.kvTile : masked ? s.qTile : (s.qTile + rows - 1) / rows * rows;
  // Up to one vector of queries the decode kernel wins: below that the query tiles leave
  // most lanes idle. Measured with 2 threads on AVX2 (8 lanes), f32: the crossover was at
  // 10 queries (S = 512, H8 Dh64), 13 (S = 2048, H16 Dh64) and 14 (S = 8192, H32 Dh128).
  s.decodeRows = o.decodeRows > 0 ? o.decodeRows : s.lanes;
  s.minSplit = 256;
  return s;
}

/// One kernel an attention op may run: the decode kernel or the tiled one with its
/// tiles, for calls of at most `maxRows` queries (0: any number).
struct FlashVariant {
  bool decode;
  FlashSchedule s;
  int64_t maxRows;
  std::string name() const {
    return decode ? "decode" : std::string(s.amx ? "tiled_amx" : "tiled") + "(q=" + std::to_string(s.qTile) + ")";
  }
};

/// Most queries the decode kernel takes by default when tiles of one vector of queries
/// exist for the next lengths (a dynamic query length without a mask, vectors of 16 lanes
/// or more: with 8, AVX2's f32, the decode kernel keeps the whole vector), f32 or bf16
/// pairs alike. Its cost grows with its query rows (dot products along the head dim, K and
/// V read once per group of up to 4 rows); a tile's stays that of a whole vector. Measured
/// with 2 threads, f32, over 8192 keys (H32 Dh128):
/// - AVX-512, Intel Xeon (Emerald Rapids), the decode kernel prefetching the next key tile
///   (FlashDecode.cpp, NextTile), the tiles' prefetches and 16-row products: 7 queries
///   12.3-12.9 ms in the decode kernel against 14.3-15.3 in tiles, 8 queries 12.8-13.1
///   against 13.7-15.6, 12 queries 16.7-19.5 against 14.2-17.1 (medians, rounds
///   alternated). Before the decode kernel prefetched, they crossed at about 6.
/// - AVX-512, AMD Zen 5, before any of those prefetches: the decode kernel 11.0 ms at 8
///   queries, 13.5 at 10, 24.1 at 16; the tiles 12.7-13.9 at 8-12 and 12.3 at 16.
/// - AVX2 (Zen 3): the decode kernel and the 8-query tiles crossed at 10-14 queries.
constexpr int64_t kDecodeRowsBeforeShortTiles = 8;

/// The tiled kernel of an attention without a mask in tiles of `vectors` vectors of
/// queries by kSmallQueryTileKeys keys (unless `o` sets the key tile), for at most that
/// many queries.
FlashVariant shortTiles(const FlashOptions &o, const FlashSchedule &s, Type ft, int64_t vectors) {
  FlashOptions small = o;
  small.qTile = vectors * s.lanes;
  if (o.kvTile == 0)
    small.kvTile = kSmallQueryTileKeys;
  FlashSchedule ss = resolveSchedule(small, ft, /*masked=*/false);
  ss.dot = s.dot;
  chooseAmx(ss, o);
  ss.prefetch = !ss.dot;
  return {false, ss, small.qTile};
}

/// Whether `op` has a mask that reads the query position (its region's argument 2): only
/// such a mask has the diagonals and bands whose partial tiles the smaller tiles of a mask
/// waste less in. One that reads only keys, heads and captures (padding: kv < lengths[b])
/// leaves one column of partial tiles per row of query tiles, and takes the tiles of no
/// mask. Measured with 2 threads on an Intel Xeon (AVX-512), the gallery's `padding` at
/// L = 2048 (H8 Dh64, 68.7% of the pairs kept): 1.00 -> 0.71 of the no-mask time.
bool diagonalMask(AttentionOp op) {
  Region &mask = op.getMask();
  return !mask.empty() && !mask.front().getArgument(2).use_empty();
}

/// The kernels of `op`, the first whose maxRows admits the query length running: several
/// for one bound at run time, and a static length takes the first that admits it.
SmallVector<FlashVariant> variantsOf(AttentionOp op, const FlashOptions &o) {
  auto qt = cast<RankedTensorType>(op.getQ().getType());
  Type ft = qt.getElementType();
  bool masked = diagonalMask(op);
  FlashSchedule s = resolveSchedule(o, ft, masked);
  s.dot = onPairs(op, o);
  FlashSchedule decodeSchedule = s;
  chooseAmx(s, o);
  int64_t l = qt.getDimSize(qt.getRank() - 2);
  FlashVariant decode{true, decodeSchedule, s.decodeRows}, tiled{false, s, 0};
  SmallVector<FlashVariant> v = {decode};
  // Up to one or two vectors of queries, tiles of one or two vectors where the default
  // tiles are longer (no mask): those would leave most of their lanes idle. Measured with
  // 2 threads on AVX2, L = 16 over 8192 keys (H32 Dh128): 40 ms with 16-query tiles, 54
  // with 32. Their key tiles are long (kSmallQueryTileKeys): with few queries a tile's
  // fixed work (the output's rescale, the softmax's bookkeeping) is shared by few
  // products; measured with 2 threads on AVX-512 (Zen 5), L = 17..32 over 8192 keys (H32
  // Dh128): 23-26 ms with the default 34 keys, 12.8-13.3 ms with 256. Tiles of one vector
  // take the lengths past kDecodeRowsBeforeShortTiles from the decode kernel, when the
  // decode kernel's count is the default.
  if (o.qTile == 0 && !masked) {
    if (o.decodeRows == 0 && s.lanes >= 16 && s.qTile > s.lanes) {
      v.front().maxRows = v.front().s.decodeRows = kDecodeRowsBeforeShortTiles;
      v.push_back(shortTiles(o, s, ft, 1));
    }
    if (s.qTile > 2 * s.lanes && v.back().maxRows < 2 * s.lanes)
      v.push_back(shortTiles(o, s, ft, 2));
  }
  v.push_back(tiled);
  if (ShapedType::isDynamic(l))
    return v;
  for (const FlashVariant &x : v)
    if (x.maxRows == 0 || l <= x.maxRows)
      return {x};
  return {tiled};
}

/// What the kernels count as they run, for the runtime to read (Kernel::schedule_runs,
/// Kernel::tile_counts): the i64 global `qkv_schedule_runs`, one slot per variant of each
/// attention op (variantsOf, in order), named by the string global `qkv_schedules`
/// ("<node>:<variant>", comma separated); and the i64 global `qkv_tile_counts`, three
/// slots per op (the tiled kernel's key tiles, those computed, those computed without
/// mask code), the ops named in `qkv_attentions`.
struct ScheduleCounters {
  static constexpr const char *kRuns = qkv::abi::kScheduleRuns;
  static constexpr const char *kTiles = qkv::abi::kTileCounts;
  llvm::DenseMap<Operation *, int64_t> slot; ///< each attention op's first slot
  llvm::DenseMap<Operation *, int64_t> index; ///< each attention op's number
  int64_t slots = 0;
  ModuleOp module; ///< where the counters are declared and deferred variants outlined

  /// The tile counts' global, for `a` to add to.
  void bindTiles(ImplicitLocOpBuilder &b, Operation *op, AttentionInfo &a) const {
    a.tileCounts = memref::GetGlobalOp::create(
        b, MemRefType::get({3 * int64_t(index.size())}, b.getI64Type()), kTiles);
    a.tileSlot = 3 * index.lookup(op);
  }

  /// Adds 1 to slot `at`, atomically (a kernel may run on several threads at once).
  void count(KernelBuilder &kb, int64_t at) const {
    ImplicitLocOpBuilder &b = kb.builder();
    auto type = MemRefType::get({slots}, b.getI64Type());
    Value runs = memref::GetGlobalOp::create(b, type, kRuns);
    Value one = arith::ConstantIntOp::create(b, b.getI64Type(), 1);
    memref::AtomicRMWOp::create(b, arith::AtomicRMWKind::addi, one, runs, ValueRange{kb.idx(at)});
  }
};

/// The graph node an op came from (the import's locations name it), or "attention".
std::string nodeName(Location loc) {
  if (auto f = dyn_cast<FusedLoc>(loc))
    for (Location l : f.getLocations())
      if (isa<FileLineColLoc>(l))
        return nodeName(l);
  if (auto f = dyn_cast<FileLineColLoc>(loc))
    return f.getFilename().str();
  return "attention";
}

/// Numbers the attention ops' variants of `module` and declares the counters' globals.
ScheduleCounters declareScheduleCounters(ModuleOp module, const FlashOptions &o) {
  ScheduleCounters c;
  c.module = module;
  std::string names, ops;
  module.walk([&](AttentionOp op) {
    c.slot[op] = c.slots;
    std::string node = nodeName(op.getLoc());
    ops += (c.index.empty() ? "" : ",") + node;
    c.index[op] = static_cast<int64_t>(c.index.size());
    for (const FlashVariant &v : variantsOf(op, o)) {
      names += (names.empty() ? "" : ",") + node + ":" + v.name();
      ++c.slots;
    }
  });
  if (c.slots == 0)
    return c;
  OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
  auto counters = [&](StringRef name, int64_t n) {
    auto zeros = DenseElementsAttr::get(RankedTensorType::get({n}, b.getI64Type()),
                                        b.getI64IntegerAttr(0).getValue());
    memref::GlobalOp::create(b, module.getLoc(), name, b.getStringAttr("public"),
                             MemRefType::get({n}, b.getI64Type()), zeros, /*constant=*/false,
                             /*alignment=*/b.getI64IntegerAttr(8));
  };
  auto text = [&](StringRef name, std::string value) {
    value.push_back('\0');
    auto type = LLVM::LLVMArrayType::get(b.getI8Type(), value.size());
    LLVM::GlobalOp::create(b, module.getLoc(), type, /*isConstant=*/true, LLVM::Linkage::External,
                           name, b.getStringAttr(value));
  };
  counters(ScheduleCounters::kRuns, c.slots);
  text(qkv::abi::kSchedules, names);
  counters(ScheduleCounters::kTiles, 3 * int64_t(c.index.size()));
  text(qkv::abi::kAttentions, ops);
  return c;
}

/// Moves the code of `op` (an scf.execute_region without results: one variant's kernel)
/// into a new private function `name` at the end of `module` and calls it there instead:
/// the values the code uses from above become the function's arguments, the constants it
/// uses are cloned into it.
void outlineVariant(RewriterBase &rw, ModuleOp module, scf::ExecuteRegionOp op, StringRef name) {
  OpBuilder::InsertionGuard guard(rw);
  Region &region = op.getRegion();
  Block &body = region.front();
  llvm::SetVector<Value> captured;
  getUsedValuesDefinedAbove(region, captured);
  SmallVector<Value> args;
  for (Value v : captured) {
    Value inside;
    if (Operation *def = v.getDefiningOp(); def && def->hasTrait<OpTrait::ConstantLike>()) {
      rw.setInsertionPointToStart(&body);
      inside = rw.clone(*def)->getResult(cast<OpResult>(v).getResultNumber());
    } else {
      args.push_back(v);
      inside = body.addArgument(v.getType(), v.getLoc());
    }
    rw.replaceUsesWithIf(v, inside, [&](OpOperand &use) {
      return region.isAncestor(use.getOwner()->getParentRegion());
    });
  }
  rw.setInsertionPointToEnd(module.getBody());
  auto fn = func::FuncOp::create(rw, op.getLoc(), name,
                                 rw.getFunctionType(ValueRange(args).getTypes(), {}));
  fn.setPrivate();
  rw.inlineRegionBefore(region, fn.getBody(), fn.getBody().end());
  Operation *yield = fn.getBody().front().getTerminator();
  rw.setInsertionPoint(yield);
  rw.replaceOpWithNewOp<func::ReturnOp>(yield);
  rw.setInsertionPoint(op);
  func::CallOp::create(rw, op.getLoc(), fn, args);
  rw.eraseOp(op);
}

/// The deferred variants' kernels, each in an scf.execute_region, with the names of the
/// functions they are outlined into once the attention's code is complete.
using DeferredRegions = SmallVector<std::pair<scf::ExecuteRegionOp, std::string>>;

/// One variant's kernel, in place or (deferred) in a region that is outlined into a function
/// of its own, `qkv_deferred_schedule_<slot>` (abi::kDeferredSchedulePrefix), which a JIT
/// compile lowers and compiles when a call first reaches it.
void emitVariant(KernelBuilder &kb, AttentionInfo &a, const FlashVariant &v,
                 std::optional<int64_t> deferredSlot, DeferredRegions &deferred) {
  auto emit = [&](KernelBuilder &in) {
    (v.decode ? emitDecodeAttention : emitTiledAttention)(in, a, v.s);
  };
  if (!deferredSlot)
    return emit(kb);
  ImplicitLocOpBuilder &b = kb.builder();
  auto region = scf::ExecuteRegionOp::create(b, TypeRange{});
  OpBuilder::InsertionGuard guard(b);
  b.createBlock(&region.getRegion());
  emit(kb);
  scf::YieldOp::create(b);
  deferred.emplace_back(region, std::string(qkv::abi::kDeferredSchedulePrefix) +
                                    std::to_string(*deferredSlot));
}

/// The variants from `v` on, each behind a test of the query length against its bound
/// (none for the last), each counting its runs from slot `at`. Every variant but the last
/// (the tiles a long query length takes) is deferred (emitVariant): its code compiles
/// when a call first needs it.
void emitVariants(KernelBuilder &kb, AttentionInfo &a, ArrayRef<FlashVariant> v,
                  const ScheduleCounters &counters, int64_t at, DeferredRegions &deferred) {
  auto emit = [&](KernelBuilder &in) {
    counters.count(in, at);
    emitVariant(in, a, v[0], v.size() > 1 ? std::optional<int64_t>(at) : std::nullopt, deferred);
  };
  if (v.size() == 1)
    return emit(kb);
  kb.ifThen(
      kb.cmp(arith::CmpIPredicate::ule, a.nL, kb.idx(v[0].maxRows)), emit,
      [&](KernelBuilder &in) { emitVariants(in, a, v.drop_front(), counters, at + 1, deferred); });
}

struct FlashLowering : OpRewritePattern<AttentionOp> {
  FlashLowering(MLIRContext *ctx, FlashOptions o, const ScheduleCounters &c)
      : OpRewritePattern(ctx), opts(o), counters(c) {}

  LogicalResult matchAndRewrite(AttentionOp op, PatternRewriter &rw) const override {
    Type ft = cast<RankedTensorType>(op.getQ().getType()).getElementType();
    if (!ft.isF32() && !ft.isF64())
      return rw.notifyMatchFailure(op, "only f32 and f64 attention is lowered");
    ImplicitLocOpBuilder ib(op.getLoc(), rw);
    KernelBuilder kb(ib);
    AttentionInfo a = describe(kb, op);
    if (a.mask)
      a.tables = buildRangeTables(kb, *a.mask, a.captures);
    counters.bindTiles(ib, op, a);
    // Few queries (at most decode-rows, as a decode step has): split the keys instead of
    // tiling the queries. A query length bound at run time gets every variant and picks
    // one on each call.
    DeferredRegions deferred;
    emitVariants(kb, a, variantsOf(op, opts), counters, counters.slot.lookup(op), deferred);
    for (auto &[region, name] : deferred)
      outlineVariant(rw, counters.module, region, name);
    freeRangeTables(kb, a.tables);
    replaceWithOutput(rw, ib, op, a);
    return success();
  }

  FlashOptions opts;
  const ScheduleCounters &counters;
};

struct LowerAttentionToFlashPass
    : qkv::ir::impl::LowerAttentionToFlashBase<LowerAttentionToFlashPass> {
  using LowerAttentionToFlashBase::LowerAttentionToFlashBase;
  void runOnOperation() override {
    if (isaTier != "f32" && isaTier != "avx512bf16" && isaTier != "amx") {
      getOperation().emitError() << "qkv-lower-attention-to-flash: unknown isa '" << isaTier
                                 << "' (f32, avx512bf16, amx)";
      return signalPassFailure();
    }
    FlashOptions options{vectorBits, qTile, kvTile, decodeRows, isaTier != "f32", isaTier == "amx"};
    ScheduleCounters counters = declareScheduleCounters(getOperation(), options);
    RewritePatternSet patterns(&getContext());
    patterns.add<FlashLowering>(&getContext(), options, counters);
    GreedyRewriteConfig config;
    config.setStrictness(GreedyRewriteStrictness::ExistingOps);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns), config)))
      return signalPassFailure();
    WalkResult left = getOperation().walk([](AttentionOp op) {
      op.emitError("qkv-lower-attention-to-flash: cannot lower this attention");
      return WalkResult::interrupt();
    });
    if (left.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
