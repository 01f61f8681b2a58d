// The split-KV (flash-decoding) kernel for attention with few queries over many keys:
// one decode step (Lq = 1) or a few speculative tokens. Vectorizing over queries would
// waste most lanes, so this kernel vectorizes over the head dim (scores are dot
// products) and over keys (mods, softmax). The keys are split into chunks so that there
// are enough tasks for every thread even with one sequence and few heads; each task
// keeps, for every query row of its kv head (all query heads of a GQA group share the
// key/value reads), a running max, sum and output row; a second parallel loop merges
// the splits by log-sum-exp. Everything is in log2 units, as in the tiled kernel.
#include "FlashAttention.h"

#include <limits>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"

#include "TileClassifier.h"
#include "VectorMath.h"

using namespace mlir;
using namespace qkv::ir;

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

/// The decode kernel's sizes and per-task buffers.
struct DecodeState {
  Value rows;        // query rows per kv head: group * L
  Value chunk;       // keys per split, a multiple of the key tile
  Value splits;      // number of splits
  Value qScale;      // scale folded into the dot products (times log2 e without a score mod)
  int64_t pLen;      // key tile rounded up to whole vectors
  int64_t group = 1; // query rows that share each key's and value's loads (rowGroup)
  // per task (stack):
  Value o, m, l, p; // o: rows x Dv, m/l: rows, p: group x pLen scores of a group of rows
  Value corr;       // group: the rows' rescale factors for this tile
};

/// One query row of a task: its index among the kv head's rows, its head and position.
struct DecodeRow {
  Value r, h, i;
};

/// Lines [lo, hi) of each row of one operand, `elems` elements to a 64-byte line.
struct RowLines {
  Value lo, hi;
  int64_t elems = 16;
};

/// What one group of rows prefetches of the next key tile while it computes: lines `k`
/// of each key row during its scores, `v` of each value row during its values. Key row
/// j's step prefetches row min(j + kvTile, last): never past the split's keys in this
/// segment.
struct NextTile {
  Value last;
  RowLines k, v;
};

/// Elements of src's storage in a 64-byte cache line.
int64_t lineElements(const RowSource &src) {
  auto t = cast<MemRefType>(src.stored.mem.getType());
  return std::max<int64_t>(1, 512 / t.getElementTypeBitWidth());
}

/// The group's lines of src's row kvTile past `row` (at most next.last); src is the key
/// or the value operand, `lines` its share in `next`.
void prefetchNext(KernelBuilder &kb, const FlashSchedule &s, const RowSource &src,
                  const KeySegment &seg, const NextTile &next, const RowLines &lines, Value b,
                  Value hk, Value row) {
  Value ahead = kb.min(kb.add(row, kb.idx(s.kvTile)), next.last);
  kb.forLoop(lines.lo, lines.hi, 1, [&](KernelBuilder &x, Value line) {
    prefetchRow(x, src, seg, b, hk, ahead, x.mul(line, lines.elems));
  });
}

/// Group g of n's share of the next key tile (NextTile): the g-th n-th of each key row's
/// and value row's lines, so that the groups together request the tile once, spread over
/// all their steps. The memory then streams while the cores compute: without it a tile's
/// first group waited on its loads and the DRAM idled while the other groups reread the
/// tile from L2. Measured with 2 threads on AVX-512 (Xeon, Emerald Rapids), 4 queries over
/// 8192 keys (H32 Dh128, two groups of 2): medians of 21 in 8 rounds 11.5-13.6 ms ->
/// 10.1-10.8 ms (12.2 in one). A kv head of one query row (MHA decoding one token)
/// prefetches nothing: its products are few, there is nothing to overlap, and the
/// prefetches cost (9 rounds: 8.5 -> 9.3 ms on average).
NextTile nextTileShare(KernelBuilder &kb, const AttentionInfo &a, const DecodeState &st, Value last,
                       Value g, Value n) {
  auto share = [&](Value lines, Value at) { return kb.divu(kb.mul(at, lines), n); };
  Value g1 = kb.add(g, kb.idx(1));
  Value rowsToOverlap = kb.cmp(arith::CmpIPredicate::sge, st.rows, kb.idx(2));
  // The share of a row of `dim` elements of src.
  auto rowLines = [&](const RowSource &src, Value dim) {
    RowLines r;
    r.elems = lineElements(src);
    Value lines = kb.ceilDiv(dim, kb.idx(r.elems));
    r.lo = share(lines, g);
    r.hi = arith::SelectOp::create(kb.builder(), rowsToOverlap, share(lines, g1), r.lo);
    return r;
  };
  return {last, rowLines(a.k, a.nDh), rowLines(a.v, a.nDv)};
}

/// How many query rows share each key's and value's loads: with a static Dv, as many as
/// fit in registers with their output rows beside one value row (at most 4); where fewer
/// than 2 fit, 4, their values in passes over column slices (valuePasses); with a dynamic
/// Dv, 2. Rows one at a time load every key and value vector once per row: measured with
/// 2 threads on AVX-512 (Zen 5), 8 queries over 8192 keys (H32 Dh128) took 11.0-12.2 ms
/// so and 8.8-9.3 ms in pairs; on AVX2 (Zen 3), where one row of Dh 128 (16 vectors)
/// fills the 16 registers, 4 queries over 8192 keys (H32) took 15.9-16.2 ms one at a time
/// and 13.8-16.1 in a group of 4, a GQA decode step over 32768 keys 15.4-18.8 -> 12.8-14.0
/// (4 rows per kv head), Dh 64 7.4-8.7 -> 6.8-8.2 (medians of 3-4 alternated rounds).
int64_t rowGroup(const AttentionInfo &a, const FlashSchedule &s) {
  if (!a.staticDv)
    return 2;
  int64_t nv = (*a.staticDv + s.lanes - 1) / s.lanes;
  if (nv > 16)
    return 2;
  // n rows of nv accumulators, one value row and n broadcasts.
  int64_t fit = (s.registers - nv) / (nv + 1);
  return fit < 2 ? 4 : std::min<int64_t>(fit, 4);
}

/// Passes over a tile's keys for the values of a group of `rows` rows of nv vectors each:
/// one when all the rows' accumulators fit in the vector registers beside one value
/// vector and a broadcast per row, else as few as make each pass's share fit. A lone row
/// takes one pass whatever its width: on AVX2 (Zen 3) one row of Dv = 128 keeps two of
/// its 16 accumulators in memory, and two passes were slower still (one token over 8192
/// keys, H32: 9.4-10.0 ms -> 9.3-11.8, 5 rounds).
int64_t valuePasses(int64_t nv, int64_t rows, int64_t registers) {
  if (rows == 1)
    return 1;
  int64_t perPass = std::max<int64_t>(1, (registers - 1 - rows) / rows);
  return (nv + perPass - 1) / perPass;
}

/// Vector width chunks over [0, n): full vectors, then one masked vector for the tail.
/// `body(kb, offset, mask)` gets a null mask for full vectors.
void overVectors(KernelBuilder &kb, Value n, std::optional<int64_t> staticN, int64_t lanes,
                 const std::function<void(KernelBuilder &, Value, Value)> &body) {
  Value full = kb.mul(kb.divu(n, kb.idx(lanes)), lanes);
  kb.forLoop(kb.idx(0), full, lanes, [&](KernelBuilder &in, Value c) { body(in, c, Value()); });
  if (staticN && *staticN % lanes == 0)
    return;
  Value rest = kb.sub(n, full);
  kb.ifThen(kb.cmp(arith::CmpIPredicate::sgt, rest, kb.idx(0)), [&](KernelBuilder &in) {
    auto mt = VectorType::get({lanes}, in.builder().getI1Type());
    body(in, full, vector::CreateMaskOp::create(in.builder(), mt, ValueRange{rest}));
  });
}

/// One step of transposeSums: x and y each hold sources of `2 half` partial sums (lanes /
/// (2 half) of them, in order); the result holds x's sources then y's, each folded to
/// `half` partial sums (two shuffles and an add).
Value foldSums(KernelBuilder &kb, Value x, Value y, int64_t half) {
  int64_t lanes = cast<VectorType>(x.getType()).getNumElements();
  SmallVector<int64_t> lo, hi;
  for (int64_t base : {int64_t(0), lanes})
    for (int64_t g = 0; g < lanes; g += 2 * half)
      for (int64_t l = 0; l < half; ++l) {
        lo.push_back(base + g + l);
        hi.push_back(base + g + half + l);
      }
  ImplicitLocOpBuilder &b = kb.builder();
  Value xs = vector::ShuffleOp::create(b, x, y, lo);
  Value ys = vector::ShuffleOp::create(b, x, y, hi);
  return arith::AddFOp::create(b, xs, ys);
}

/// The sums of the lanes of lanes / `folded` sources as one vector whose lane k is source
/// k's sum, where each of `v` already holds `folded` sources of lanes / folded partial sums
/// (folded = 1: v holds one source per vector, as many vectors as lanes, a power of two):
/// pairs of vectors are halved and added, each step keeping every source's partial sums in
/// order (log2 steps of two shuffles and an add per pair, instead of a horizontal
/// reduction per source).
Value transposeSums(KernelBuilder &kb, SmallVector<Value> v, int64_t folded = 1) {
  int64_t lanes = cast<VectorType>(v.front().getType()).getNumElements();
  for (int64_t half = lanes / (2 * folded); half >= 1; half /= 2) {
    SmallVector<Value> next;
    for (size_t i = 0; i + 1 < v.size(); i += 2)
      next.push_back(foldSums(kb, v[i], v[i + 1], half));
    v = std::move(next);
  }
  return v.front();
}

/// The mask of the last vector of a static extent `n` that is not whole vectors, else null.
Value staticTailMask(KernelBuilder &kb, std::optional<int64_t> n, int64_t lanes) {
  if (!n || *n % lanes == 0)
    return {};
  return kb.firstLanes(kb.idx(*n % lanes), lanes);
}

/// The query rows of a group held in registers for its scores: rows[r][c] is row r's
/// vector c of the head dim (a static Dh; the last vector masked past it by `tail`). Empty
/// when they would not fit beside the score kernel's accumulators (queryRegisters).
struct QueryRegisters {
  SmallVector<SmallVector<Value>> rows;
  Value tail; // the head dim's last vector, when Dh is not whole vectors
  bool empty() const { return rows.empty(); }
};

/// The group's query vectors, loaded once per key tile, when Dh is static and the group's
/// rows take at most half the vector registers: the key loop then loads each key vector
/// once and multiplies it with every row in registers (one load per `rows` FMAs), where it
/// otherwise loads a query vector per product. Measured with 2 threads on AVX-512 (Xeon):
/// 8 queries over 8192 keys (H32 Dh128) 29.1 -> 25.6 ms, a GQA decode step (H32 Hkv8,
/// 4096 keys) 2.92 -> 2.59 ms.
QueryRegisters queryRegisters(KernelBuilder &kb, const AttentionInfo &a, const FlashSchedule &s,
                              Value b, ArrayRef<DecodeRow> rows) {
  if (!a.staticDh)
    return {};
  int64_t nv = (*a.staticDh + s.lanes - 1) / s.lanes;
  if (int64_t(rows.size()) * nv > s.registers / 2)
    return {};
  VectorType vt = kb.vec(a.ft, s.lanes);
  QueryRegisters q;
  q.tail = staticTailMask(kb, a.staticDh, s.lanes);
  for (const DecodeRow &row : rows) {
    SmallVector<Value> vs;
    for (int64_t c = 0; c < nv; ++c) {
      Value d = kb.idx(c * s.lanes);
      vs.push_back(
          loadAs(kb, vt, a.q, a.q.at(kb, b, row.h, row.i, d), c == nv - 1 ? q.tail : Value()));
    }
    q.rows.push_back(std::move(vs));
  }
  return q;
}

/// The products of key row kr with every row of the group, accumulated along the head
/// dim: one vector per row (its lanes still to be summed), the key's vectors loaded once
/// for all the rows, front to back. With the rows in registers (`q` not empty) the head
/// dim is unrolled.
SmallVector<Value> keyDots(KernelBuilder &kb, const AttentionInfo &a, const FlashSchedule &s,
                           const KeySegment &seg, Value b, ArrayRef<DecodeRow> rows, Value hk,
                           Value kr, const QueryRegisters &q) {
  VectorType vt = kb.vec(a.ft, s.lanes);
  SmallVector<Value> zeros(rows.size(), kb.fconst(vt, 0.0));
  if (!q.empty()) {
    size_t nv = q.rows.front().size();
    SmallVector<Value> acc = zeros;
    for (size_t c = 0; c < nv; ++c) {
      Value kv = readRowVector(kb, vt, a.k, seg, b, hk, kr, kb.idx(int64_t(c) * s.lanes),
                               c + 1 == nv ? q.tail : Value());
      for (size_t r = 0; r < rows.size(); ++r)
        acc[r] = vector::FMAOp::create(kb.builder(), q.rows[r][c], kv, acc[r]);
    }
    return acc;
  }
  auto step = [&](KernelBuilder &x, Value d, Value mask, ValueRange acc) {
    Value kv = readRowVector(x, vt, a.k, seg, b, hk, kr, d, mask);
    SmallVector<Value> out;
    for (size_t r = 0; r < rows.size(); ++r) {
      Value qv = loadAs(x, vt, a.q, a.q.at(x, b, rows[r].h, rows[r].i, d), mask);
      out.push_back(vector::FMAOp::create(x.builder(), qv, kv, acc[r]));
    }
    return out;
  };
  Value full = kb.mul(kb.divu(a.nDh, kb.idx(s.lanes)), s.lanes);
  SmallVector<Value> sums =
      kb.forLoop(kb.idx(0), full, kb.idx(s.lanes), zeros,
                 [&](KernelBuilder &x, Value d, ValueRange c) { return step(x, d, Value(), c); });
  std::optional<int64_t> dh = a.staticDh;
  if (!dh || *dh % s.lanes != 0) {
    // The tail of the head dim, masked (zeros contribute nothing).
    auto mt = VectorType::get({s.lanes}, kb.builder().getI1Type());
    Value mask = vector::CreateMaskOp::create(kb.builder(), mt, ValueRange{kb.sub(a.nDh, full)});
    sums = step(kb, full, mask, sums);
  }
  return sums;
}

/// The partial sums of keys [k0, k0 + count) (a power of two) of every row of the group:
/// one vector per row holding `count` sources, folded as each pair of halves is computed
/// (transposeSums' first steps, taken early so that few products wait in registers).
SmallVector<Value> keySums(KernelBuilder &kb, const AttentionInfo &a, const FlashSchedule &s,
                           const KeySegment &seg, Value b, ArrayRef<DecodeRow> rows, Value hk,
                           Value j, int64_t k0, int64_t count, const QueryRegisters &q) {
  if (count == 1)
    return keyDots(kb, a, s, seg, b, rows, hk, kb.add(j, k0), q);
  SmallVector<Value> lo = keySums(kb, a, s, seg, b, rows, hk, j, k0, count / 2, q);
  SmallVector<Value> hi = keySums(kb, a, s, seg, b, rows, hk, j, k0 + count / 2, count / 2, q);
  for (size_t r = 0; r < rows.size(); ++r)
    lo[r] = foldSums(kb, lo[r], hi[r], s.lanes / count);
  return lo;
}

/// The scores of `keys` keys from j for every row of the group (rows x keys = one vector
/// of lanes): each row's sums over the keys (keySums, the key rows read in order), then
/// the rows' as one vector (transposeSums), stored as each row's run of keys.
void scoreBlock(KernelBuilder &kb, const AttentionInfo &a, const FlashSchedule &s,
                const DecodeState &st, const KeySegment &seg, Value b, ArrayRef<DecodeRow> rows,
                Value hk, Value j0, Value j, int64_t keys, const QueryRegisters &q,
                const NextTile &next) {
  VectorType vt = kb.vec(a.ft, s.lanes);
  size_t n = rows.size();
  for (int64_t k = 0; k < keys; ++k)
    prefetchNext(kb, s, a.k, seg, next, next.k, b, hk, kb.add(kb.add(j0, j), kb.idx(k)));
  SmallVector<Value> sums = keySums(kb, a, s, seg, b, rows, hk, kb.add(j0, j), 0, keys, q);
  Value scores =
      arith::MulFOp::create(kb.builder(), transposeSums(kb, sums, keys), kb.splat(st.qScale, vt));
  for (size_t r = 0; r < n; ++r) {
    Value run = scores;
    if (n > 1) {
      SmallVector<int64_t> at = {int64_t(r) * keys}, size = {keys}, stride = {1};
      run = vector::ExtractStridedSliceOp::create(kb.builder(), scores, at, size, stride);
    }
    kb.vstore(run, st.p, {kb.idx(r), j});
  }
}

/// p[n, j] = qScale * q[b, h, i, :] . k[b, hk, j0 + j, :] for the group's rows n and
/// j < cols; -inf up to pLen. Blocks of keys whose scores fill one vector for the group
/// (scoreBlock), then the rest one key at a time, reduced across lanes. Each key's step
/// prefetches the group's share of the next tile's key row (NextTile).
void rowScores(KernelBuilder &kb, const AttentionInfo &a, const FlashSchedule &s,
               const DecodeState &st, const KeySegment &seg, Value b, ArrayRef<DecodeRow> rows,
               Value hk, Value j0, Value cols, const NextTile &next) {
  size_t n = rows.size();
  int64_t keys = s.lanes % int64_t(n) == 0 ? s.lanes / int64_t(n) : 1;
  QueryRegisters q = queryRegisters(kb, a, s, b, rows);
  Value blocked = kb.idx(0);
  if (keys > 1 && llvm::isPowerOf2_64(s.lanes) && llvm::isPowerOf2_64(keys)) {
    blocked = kb.mul(kb.divu(cols, kb.idx(keys)), keys);
    kb.forLoop(kb.idx(0), blocked, keys, [&](KernelBuilder &in, Value j) {
      scoreBlock(in, a, s, st, seg, b, rows, hk, j0, j, keys, q, next);
    });
  }
  kb.forLoop(blocked, cols, 1, [&](KernelBuilder &in, Value j) {
    prefetchNext(in, s, a.k, seg, next, next.k, b, hk, in.add(j0, j));
    SmallVector<Value> sums = keyDots(in, a, s, seg, b, rows, hk, in.add(j0, j), q);
    for (size_t r = 0; r < n; ++r) {
      Value dot = vector::ReductionOp::create(in.builder(), vector::CombiningKind::ADD, sums[r],
                                              arith::FastMathFlags::reassoc);
      in.store(arith::MulFOp::create(in.builder(), dot, st.qScale), st.p, {in.idx(r), j});
    }
  });
  Value ninf = kb.fconst(a.ft, kNegInf);
  kb.forLoop(cols, kb.idx(st.pLen), 1, [&](KernelBuilder &in, Value j) {
    for (size_t r = 0; r < n; ++r)
      in.store(ninf, st.p, {in.idx(r), j});
  });
}

/// Mods and mask over the scores of `row` (p's row pr; vectorized over keys), then the
/// online-softmax update of the row: returns the rescale factor of its output row.
Value rowSoftmax(KernelBuilder &kb, const AttentionInfo &a, const FlashSchedule &s,
                 const DecodeState &st, Value b, const DecodeRow &row, Value pr, Value j0,
                 Value cols, bool withMask, bool checksHold) {
  Value h = row.h, i = row.i, r = row.r;
  ImplicitLocOpBuilder &ib = kb.builder();
  VectorType vt = kb.vec(a.ft, s.lanes);
  Value lastKv = kb.sub(a.nS, kb.idx(1));
  Value colsV = kb.splat(cols, kb.vec(ib.getIndexType(), s.lanes));
  Value ninfV = kb.fconst(vt, kNegInf);
  Value vmax =
      kb.forLoop(kb.idx(0), kb.idx(st.pLen), kb.idx(s.lanes), {kb.fconst(vt, kNegInf)},
                 [&](KernelBuilder &in, Value c, ValueRange acc) {
                   Value sc = in.vload(vt, st.p, {pr, c});
                   Value kv = in.name(in.laneIds(in.add(j0, c), lastKv, s.lanes), "kv");
                   sc = emitScoreAndMask(in, a, sc, b, h, i, kv, withMask, s.lanes, checksHold);
                   // Lanes past the tile's keys stay -inf whatever a mod made of them.
                   Value lane = in.laneIds(c, in.idx(st.pLen), s.lanes);
                   Value valid =
                       arith::CmpIOp::create(in.builder(), arith::CmpIPredicate::slt, lane, colsV);
                   sc = arith::SelectOp::create(in.builder(), valid, sc, ninfV);
                   in.vstore(sc, st.p, {pr, c});
                   ImplicitLocOpBuilder &x = in.builder();
                   Value gt = arith::CmpFOp::create(x, arith::CmpFPredicate::OGT, sc, acc[0]);
                   return SmallVector<Value>{arith::SelectOp::create(x, gt, sc, acc[0])};
                 })[0];
  Value tileMax = vector::ReductionOp::create(ib, vector::CombiningKind::MAXIMUMF, vmax);
  Value mOld = kb.load(st.m, {r});
  Value gt = arith::CmpFOp::create(ib, arith::CmpFPredicate::OGT, tileMax, mOld);
  Value mNew = arith::SelectOp::create(ib, gt, tileMax, mOld);
  Value none = arith::CmpFOp::create(ib, arith::CmpFPredicate::OEQ, mNew, kb.fconst(a.ft, kNegInf));
  Value mUse = arith::SelectOp::create(ib, none, kb.fconst(a.ft, 0.0), mNew);
  Value corr = emitExp2(kb, arith::SubFOp::create(ib, mOld, mUse));
  Value mUseV = kb.splat(mUse, vt);
  Value vsum = kb.forLoop(kb.idx(0), kb.idx(st.pLen), kb.idx(s.lanes), {kb.fconst(vt, 0.0)},
                          [&](KernelBuilder &in, Value c, ValueRange acc) {
                            ImplicitLocOpBuilder &x = in.builder();
                            Value sc = in.vload(vt, st.p, {pr, c});
                            Value p = emitExp2(in, arith::SubFOp::create(x, sc, mUseV));
                            in.vstore(p, st.p, {pr, c});
                            return SmallVector<Value>{arith::AddFOp::create(x, acc[0], p)};
                          })[0];
  Value sum = vector::ReductionOp::create(ib, vector::CombiningKind::ADD, vsum,
                                          arith::FastMathFlags::reassoc);
  kb.store(mNew, st.m, {r});
  Value l = kb.load(st.l, {r});
  kb.store(math::FmaOp::create(ib, l, corr, sum), st.l, {r});
  return corr;
}

/// o[r, :] = o[r, :] * corr + sum_{j < cols} p[n, j] * v[b, hk, j0 + j, :] for the
/// group's rows r (p's rows n), each value vector loaded once for all of them. With a
/// static head dim the group's output rows stay in registers and each value row is read
/// once, front to back; otherwise one vector of the rows at a time. Each key's step
/// prefetches the group's share of the next tile's value row (NextTile), in the first pass.
void rowValues(KernelBuilder &kb, const AttentionInfo &a, const FlashSchedule &s,
               const DecodeState &st, const KeySegment &seg, Value b, Value hk,
               ArrayRef<DecodeRow> rows, Value j0, Value cols, ArrayRef<Value> corrs,
               const NextTile &next) {
  VectorType vt = kb.vec(a.ft, s.lanes);
  size_t n = rows.size();
  SmallVector<Value> corrV;
  for (Value c : corrs)
    corrV.push_back(kb.splat(c, vt));
  auto probs = [&](KernelBuilder &x, Value j) {
    SmallVector<Value> p;
    for (size_t r = 0; r < n; ++r)
      p.push_back(x.splat(x.load(st.p, {x.idx(r), j}), vt));
    return p;
  };
  // The vectors of columns starting at ds (each masked by its mask) of every row of the
  // group, in registers over the tile's keys.
  // `first` (null: always) says when this pass over the keys is the first; `prefetch`
  // false: a later pass of a static Dv, which prefetches nothing.
  auto run = [&](KernelBuilder &in, ArrayRef<Value> ds, ArrayRef<Value> masks, Value first,
                 bool prefetch) {
    size_t nv = ds.size();
    SmallVector<Value> acc;
    for (size_t r = 0; r < n; ++r)
      for (size_t c = 0; c < nv; ++c) {
        Value o = in.vload(vt, st.o, {rows[r].r, ds[c]}, masks[c]);
        acc.push_back(arith::MulFOp::create(in.builder(), o, corrV[r]));
      }
    SmallVector<Value> res =
        in.forLoop(in.idx(0), cols, in.idx(1), acc, [&](KernelBuilder &x, Value j, ValueRange cur) {
          SmallVector<Value> p = probs(x, j), out(cur.begin(), cur.end());
          auto fetch = [&](KernelBuilder &y) {
            prefetchNext(y, s, a.v, seg, next, next.v, b, hk, y.add(j0, j));
          };
          if (first)
            x.ifThen(first, fetch);
          else if (prefetch)
            fetch(x);
          for (size_t c = 0; c < nv; ++c) {
            Value vv = readRowVector(x, vt, a.v, seg, b, hk, x.add(j0, j), ds[c], masks[c]);
            for (size_t r = 0; r < n; ++r)
              out[r * nv + c] = vector::FMAOp::create(x.builder(), p[r], vv, cur[r * nv + c]);
          }
          return out;
        });
    for (size_t r = 0; r < n; ++r)
      for (size_t c = 0; c < nv; ++c)
        in.vstore(res[r * nv + c], st.o, {rows[r].r, ds[c]}, masks[c]);
  };
  if (a.staticDv && *a.staticDv <= 16 * s.lanes) {
    int64_t nv = (*a.staticDv + s.lanes - 1) / s.lanes;
    Value tailMask = staticTailMask(kb, a.staticDv, s.lanes);
    // Passes over the keys, each for as many of the rows' vectors as fit in registers
    // beside one value vector and the rows' broadcasts, of equal width.
    int64_t passes = valuePasses(nv, int64_t(n), s.registers);
    int64_t width = (nv + passes - 1) / passes;
    for (int64_t c0 = 0; c0 < nv; c0 += width) {
      SmallVector<Value> ds, masks;
      for (int64_t c = c0; c < std::min(nv, c0 + width); ++c) {
        ds.push_back(kb.idx(c * s.lanes));
        masks.push_back(c == nv - 1 ? tailMask : Value());
      }
      run(kb, ds, masks, Value(), c0 == 0);
    }
    return;
  }
  overVectors(kb, a.nDv, a.staticDv, s.lanes, [&](KernelBuilder &in, Value d, Value mask) {
    run(in, {d}, {mask}, in.cmp(arith::CmpIPredicate::eq, d, in.idx(0)), true);
  });
}

/// The positions of a key tile: every query row of the heads [h0, h0 + group), keys
/// [j0, j0 + cols).
SmallVector<Interval> keyTileRanges(KernelBuilder &kb, const AttentionInfo &a, Value b, Value h0,
                                    Value j0, Value cols) {
  Value one = kb.idx(1);
  Value lastH = kb.sub(kb.add(h0, a.group), one);
  Value zero = kb.idx(0), lastQ = kb.sub(a.nL, one);
  Value lastKv = kb.sub(kb.add(j0, cols), one);
  return tileRanges(a, b, {h0, lastH}, {zero, lastQ}, {j0, lastKv});
}

/// Whether the mods' checks pass in the whole tile (`ranges`; the mask's too, also where
/// a full tile does not run it): then its rows run the mods without them. The mods also
/// run on the lanes past the tile's keys up to pLen (their scores then dropped), at keys
/// up to the last: the proof covers those too.
Value tileChecksPass(KernelBuilder &kb, const AttentionInfo &a, const DecodeState &st,
                     ArrayRef<Interval> ranges, Value j0) {
  SmallVector<Interval> lanes(ranges);
  Value lastLane = kb.min(kb.add(j0, kb.idx(st.pLen - 1)), kb.sub(a.nS, kb.idx(1)));
  lanes[3].hi = kb.max(lanes[3].hi, lastLane);
  return modChecksPass(kb, a, lanes, /*withMask=*/true);
}

/// One key tile of one task, for every query row of the kv head.
void decodeTile(KernelBuilder &kb, const AttentionInfo &a, const FlashSchedule &s,
                const DecodeState &st, const KeySegment &seg, Value b, Value hk, Value j0,
                Value jEnd) {
  Value cols = kb.min(kb.idx(s.kvTile), kb.sub(jEnd, j0));
  Value one = kb.idx(1);
  Value h0 = kb.mul(hk, a.group);
  // Rows [r0, r0 + n) of the kv head as one group.
  auto rowAt = [&](KernelBuilder &x, Value r) {
    return DecodeRow{r, x.add(h0, x.divu(r, a.nL)), x.remu(r, a.nL)};
  };
  SmallVector<Interval> ranges = keyTileRanges(kb, a, b, h0, j0, cols);
  Value pass = tileChecksPass(kb, a, st, ranges, j0);
  // Rows [r0, r0 + n) as group g of `groups`.
  auto group = [&](KernelBuilder &x, Value r0, int64_t n, Value g, Value groups,
                   std::optional<Value> full) {
    SmallVector<DecodeRow> rows;
    for (int64_t k = 0; k < n; ++k)
      rows.push_back(rowAt(x, x.add(r0, k)));
    NextTile next = nextTileShare(x, a, st, x.sub(jEnd, one), g, groups);
    rowScores(x, a, s, st, seg, b, rows, hk, j0, cols, next);
    auto soft = [&](KernelBuilder &y, bool withMask) {
      // The softmax row by row in a loop (one copy of the mods' code per group size).
      auto rowsSoftmax = [&](bool hold) {
        return [&, hold](KernelBuilder &w) {
          w.forLoop(w.idx(0), w.idx(n), 1, [&](KernelBuilder &z, Value k) {
            Value corr =
                rowSoftmax(z, a, s, st, b, rowAt(z, z.add(r0, k)), k, j0, cols, withMask, hold);
            z.store(corr, st.corr, {k});
          });
        };
      };
      if (pass)
        y.ifThen(pass, rowsSoftmax(true), rowsSoftmax(false));
      else
        rowsSoftmax(false)(y);
      SmallVector<Value> corrs;
      for (int64_t k = 0; k < n; ++k)
        corrs.push_back(y.load(st.corr, {y.idx(k)}));
      rowValues(y, a, s, st, seg, b, hk, rows, j0, cols, corrs, next);
    };
    if (full)
      x.ifThen(
          *full, [&](KernelBuilder &y) { soft(y, false); },
          [&](KernelBuilder &y) { soft(y, true); });
    else
      soft(x, a.mask != nullptr);
  };
  // Whole groups of st.group rows, then the rest one by one.
  auto work = [&](KernelBuilder &in, std::optional<Value> full) {
    Value whole = st.group > 1 ? in.mul(in.divu(st.rows, in.idx(st.group)), st.group) : in.idx(0);
    Value wholeGroups = in.divu(whole, in.idx(st.group));
    Value groups = in.add(wholeGroups, in.sub(st.rows, whole));
    if (st.group > 1)
      in.forLoop(in.idx(0), whole, st.group, [&](KernelBuilder &x, Value r0) {
        group(x, r0, st.group, x.divu(r0, x.idx(st.group)), groups, full);
      });
    in.forLoop(whole, st.rows, 1, [&](KernelBuilder &x, Value r) {
      group(x, r, 1, x.add(wholeGroups, x.sub(r, whole)), groups, full);
    });
  };
  std::optional<TileClass> cls;
  if (a.mask)
    cls = classifyTile(kb, *a.mask, ranges, a.captures, a.tables);
  if (!cls)
    return work(kb, std::nullopt);
  Value notEmpty = arith::XOrIOp::create(
      kb.builder(), cls->empty,
      arith::ConstantOp::create(kb.builder(), kb.builder().getBoolAttr(true)));
  kb.ifThen(notEmpty, [&](KernelBuilder &in) { work(in, cls->full); });
}

/// How many splits: enough tasks for 4 per thread, each split at least minSplit keys.
Value chooseSplits(KernelBuilder &kb, const AttentionInfo &a, const FlashSchedule &s) {
  ImplicitLocOpBuilder &ib = kb.builder();
  auto module = a.op->getParentOfType<ModuleOp>();
  auto fnType = ib.getFunctionType({}, {ib.getI32Type()});
  if (!module.lookupSymbol<func::FuncOp>("omp_get_max_threads")) {
    OpBuilder mb(module.getBodyRegion());
    auto f = func::FuncOp::create(mb, module.getLoc(), "omp_get_max_threads", fnType);
    f.setPrivate();
  }
  Value threads =
      func::CallOp::create(ib, "omp_get_max_threads", TypeRange{ib.getI32Type()}, ValueRange{})
          .getResult(0);
  threads = arith::IndexCastOp::create(ib, ib.getIndexType(), threads);
  Value tasks = kb.mul(a.nB, a.nHk);
  Value want = kb.ceilDiv(kb.mul(threads, 4), kb.max(tasks, kb.idx(1)));
  Value most = kb.max(kb.ceilDiv(a.nS, s.minSplit), kb.idx(1));
  return kb.max(kb.min(want, most), kb.idx(1));
}

/// One task of the decode kernel: keys [sp * chunk, (sp + 1) * chunk) of kv head hk, for
/// every query row of its group; leaves (o, m, l) per row in `part`.
void splitTask(KernelBuilder &in, const AttentionInfo &a, const FlashSchedule &s,
               const DecodeState &st, Value part, Value b, Value hk, Value sp) {
  DecodeState t = st;
  auto dv = a.staticDv ? *a.staticDv : ShapedType::kDynamic;
  SmallVector<Value> oDyn{st.rows};
  if (!a.staticDv)
    oDyn.push_back(a.nDv);
  t.o = in.stackBuffer(a.ft, {ShapedType::kDynamic, dv}, oDyn);
  t.m = in.stackBuffer(a.ft, {ShapedType::kDynamic}, {st.rows});
  t.l = in.stackBuffer(a.ft, {ShapedType::kDynamic}, {st.rows});
  t.p = in.stackBuffer(a.ft, {st.group, st.pLen}, {});
  t.corr = in.stackBuffer(a.ft, {st.group}, {});
  Value zero = in.fconst(a.ft, 0.0), ninf = in.fconst(a.ft, kNegInf);
  in.forLoop(in.idx(0), st.rows, 1, [&](KernelBuilder &x, Value r) {
    x.store(ninf, t.m, {r});
    x.store(zero, t.l, {r});
    x.forLoop(x.idx(0), a.nDv, 1, [&](KernelBuilder &y, Value d) { y.store(zero, t.o, {r, d}); });
  });
  Value jBegin = in.mul(sp, st.chunk);
  Value jEnd = in.min(a.nS, in.add(jBegin, st.chunk));
  // The split's keys, segment by segment (one segment unless the keys are a cache view).
  for (const KeySegment &seg : keySegments(in, a, b)) {
    Value from = in.max(jBegin, seg.begin), to = in.min(jEnd, seg.end);
    in.forLoop(from, to, s.kvTile,
               [&](KernelBuilder &x, Value j0) { decodeTile(x, a, s, t, seg, b, hk, j0, to); });
  }
  Value base = in.mul(in.add(in.mul(in.add(in.mul(b, a.nHk), hk), st.splits), sp), st.rows);
  in.forLoop(in.idx(0), st.rows, 1, [&](KernelBuilder &x, Value r) {
    Value row = x.add(base, r);
    x.forLoop(x.idx(0), a.nDv, 1, [&](KernelBuilder &y, Value d) {
      y.store(y.load(t.o, {r, d}), part, {row, d});
    });
    x.store(x.load(t.m, {r}), part, {row, a.nDv});
    x.store(x.load(t.l, {r}), part, {row, x.add(a.nDv, 1)});
  });
}

/// Merges the splits of every (b, h, query): out = sum_s 2^(m_s - M) o_s / sum_s
/// 2^(m_s - M) l_s, with M the largest m_s.
void mergeSplits(KernelBuilder &kb, const AttentionInfo &a, const DecodeState &st, Value part) {
  kb.parallel({a.nB, a.nH, a.nL}, [&](KernelBuilder &in, ValueRange iv) {
    ImplicitLocOpBuilder &x = in.builder();
    Value b = iv[0], h = iv[1], i = iv[2];
    Value hk = in.divu(h, a.group);
    Value r = in.add(in.mul(in.sub(h, in.mul(hk, a.group)), a.nL), i);
    Value base = in.mul(in.add(in.mul(b, a.nHk), hk), st.splits);
    auto rowOf = [&](KernelBuilder &y, Value sp) {
      return y.add(y.mul(y.add(base, sp), st.rows), r);
    };
    Value mMax =
        in.forLoop(in.idx(0), st.splits, in.idx(1), {in.fconst(a.ft, kNegInf)},
                   [&](KernelBuilder &y, Value sp, ValueRange acc) {
                     Value m = y.load(part, {rowOf(y, sp), a.nDv});
                     Value gt =
                         arith::CmpFOp::create(y.builder(), arith::CmpFPredicate::OGT, m, acc[0]);
                     return SmallVector<Value>{arith::SelectOp::create(y.builder(), gt, m, acc[0])};
                   })[0];
    Value none =
        arith::CmpFOp::create(x, arith::CmpFPredicate::OEQ, mMax, in.fconst(a.ft, kNegInf));
    Value mUse = arith::SelectOp::create(x, none, in.fconst(a.ft, 0.0), mMax);
    auto weight = [&](KernelBuilder &y, Value sp) {
      Value m = y.load(part, {rowOf(y, sp), a.nDv});
      return emitExp2(y, arith::SubFOp::create(y.builder(), m, mUse));
    };
    Value total = in.forLoop(in.idx(0), st.splits, in.idx(1), {in.fconst(a.ft, 0.0)},
                             [&](KernelBuilder &y, Value sp, ValueRange acc) {
                               Value l = y.load(part, {rowOf(y, sp), y.add(a.nDv, 1)});
                               return SmallVector<Value>{
                                   math::FmaOp::create(y.builder(), weight(y, sp), l, acc[0])};
                             })[0];
    // total > 0, or NaN (a kept NaN score), which 1 / total carries to the output.
    Value any = arith::CmpFOp::create(x, arith::CmpFPredicate::UGT, total, in.fconst(a.ft, 0.0));
    Value inv = arith::SelectOp::create(
        x, any, arith::DivFOp::create(x, in.fconst(a.ft, 1.0), total), in.fconst(a.ft, 0.0));
    in.forLoop(in.idx(0), a.nDv, 1, [&](KernelBuilder &y, Value d) {
      Value o = y.forLoop(y.idx(0), st.splits, y.idx(1), {y.fconst(a.ft, 0.0)},
                          [&](KernelBuilder &z, Value sp, ValueRange acc) {
                            Value od = z.load(part, {rowOf(z, sp), d});
                            return SmallVector<Value>{
                                math::FmaOp::create(z.builder(), weight(z, sp), od, acc[0])};
                          })[0];
      y.store(arith::MulFOp::create(y.builder(), o, inv), a.out.mem, a.out.at(y, b, h, i, d));
    });
    if (a.lse)
      in.store(rowLse(in, mUse, total), a.lse, lseAt(a, b, h, i));
  });
}

} // namespace

namespace qkv::ir {

void emitDecodeAttention(KernelBuilder &kb, const AttentionInfo &a, const FlashSchedule &s) {
  ImplicitLocOpBuilder &ib = kb.builder();
  DecodeState st;
  st.rows = kb.mul(a.group, a.nL);
  st.pLen = (s.kvTile + s.lanes - 1) / s.lanes * s.lanes;
  st.group = rowGroup(a, s);
  Value want = chooseSplits(kb, a, s);
  st.chunk = kb.mul(kb.ceilDiv(kb.ceilDiv(a.nS, want), s.kvTile), s.kvTile);
  st.chunk = kb.max(st.chunk, kb.idx(s.kvTile));
  st.splits = kb.ceilDiv(a.nS, st.chunk);
  st.qScale =
      a.score ? a.scale : Value(arith::MulFOp::create(ib, a.scale, kb.fconst(a.ft, M_LOG2E)));
  // Partial results: (b, hk, split, row) -> [o (Dv), m, l].
  Value nPart = kb.mul(kb.mul(kb.mul(a.nB, a.nHk), st.splits), st.rows);
  Value width = kb.add(a.nDv, 2);
  Value part = memref::AllocOp::create(
      ib, MemRefType::get({ShapedType::kDynamic, ShapedType::kDynamic}, a.ft),
      ValueRange{nPart, width});
  kb.parallel({a.nB, a.nHk, st.splits}, [&](KernelBuilder &in, ValueRange iv) {
    splitTask(in, a, s, st, part, in.name(iv[0], "b"), in.name(iv[1], "hk"),
              in.name(iv[2], "split"));
  });
  mergeSplits(kb, a, st, part);
  // Freed here, in the block that made it: a query length bound at run time puts this
  // kernel in a branch, where the pipeline's own deallocation would not reach.
  memref::DeallocOp::create(ib, part);
}

} // namespace qkv::ir
