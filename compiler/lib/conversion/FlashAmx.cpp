// The tiled attention kernel's products on AMX tiles (FlashSchedule::amx, the amx tier):
// the pairs tier's layouts (FlashPairs.cpp), with both products as tdpbf16ps on 16 x 16
// f32 accumulator tiles, four at a time (a 32 x 32 block), as the GEMM's AMX form does.
//
//   QK^T  sT (keys x queries) = K . q^T: A tiles are 16 keys x 32 head dims of K, B tiles
//         the query tile's pairs (qT, 16 pairs of head dims x 16 queries).
//   P.V   oT (head dims x queries) = V^T . P^T: A tiles are 16 head dims x 32 keys of V
//         transposed, B tiles the probabilities' pairs (pT, 16 pairs of keys x 16
//         queries).
//
// K and V are packed once per call, before the query tiles run (packForAmx): K's rows with
// Dh padded by zeros to whole tiles of 32, V transposed (Dv x keys), both with the keys
// padded by zeros to whole key tiles, so that every tile load reads whole, finite tiles. A
// cache view is packed segment by segment (its stored rows, then this call's, then its
// zeros; a paged cache's rows through its block table), one more key tile of zeros
// behind: its key tiles start at the stored length, wherever that is.
// The pad rows of qT (past Dh) and of pT (past the tile's keys) are zeros too: a tile
// product never meets uninitialized memory, whose NaN bits would reach the output.
#include "FlashAttention.h"
#include "Microkernel.h"

#include "mlir/Dialect/AMX/AMXDialect.h"

using namespace mlir;

namespace qkv::ir {

namespace {

constexpr int64_t kRows = kAmxTileRows;
constexpr int64_t kDepth = kAmxTileDepth;

Type bf16(KernelBuilder &kb) { return kb.builder().getBF16Type(); }

Value roundUp(KernelBuilder &kb, Value v, int64_t m) { return kb.mul(kb.ceilDiv(v, m), m); }

/// Element offset of row `row` of (b, hk) in a packed buffer of `rows` rows per head.
Value packedAt(KernelBuilder &kb, const AttentionInfo &a, Value b, Value hk, Value rows, Value row,
               Value width) {
  return kb.mul(kb.add(kb.mul(kb.add(kb.mul(b, a.nHk), hk), rows), row), width);
}

/// The four 16 x 16 tiles of the 32 x 32 block at (row0, col0) of `buf` (rows, then
/// columns 16 apart: emitAmxBlock's order), stored from `acc`.
void storeBlock(KernelBuilder &kb, Value buf, Value row0, int64_t col0, ArrayRef<Value> acc) {
  for (int64_t q = 0; q < 4; ++q)
    amx::TileStoreOp::create(kb.builder(), buf,
                             ValueRange{kb.add(row0, (q / 2) * kRows), kb.idx(col0 + (q % 2) * kRows)},
                             acc[q]);
}

/// The B tile of a query tile's pairs (qT or pT: 16 pair rows of step `k` by the 16
/// queries of block `nb`'s half `c`).
Value pairsTile(KernelBuilder &kb, Value buf, Value k, int64_t nb, int64_t c) {
  auto operand = amx::TileType::get({kRows, kDepth}, bf16(kb));
  Value row = kb.mul(k, kRows), col = kb.idx(2 * (nb * 2 * kRows + c * kRows));
  return amx::TileLoadOp::create(kb.builder(), operand, buf, ValueRange{row, col}).getResult();
}

/// Key row `row` of (b, hk), read from `seg`, into the packed K (its row, zeros past Dh)
/// and the packed V (its column of V transposed, zeros past Dv): one row at a time, so a
/// cache view's segments and pages take the same path as an operand's own rows.
void packKeyRow(KernelBuilder &kb, const AttentionInfo &a, const AmxOperands &p,
                const KeySegment &seg, Value vOffsets, Value b, Value hk, Value row) {
  VectorType kt = kb.vec(bf16(kb), kDepth);
  Value kBase = packedAt(kb, a, b, hk, p.keys, row, p.dh);
  kb.forLoop(kb.idx(0), p.dh, kDepth, [&](KernelBuilder &in, Value d) {
    Value mask = in.firstLanes(in.sub(a.nDh, d), kDepth);
    in.vstore(readRowVector(in, kt, a.k, seg, b, hk, row, d, mask), p.k, {in.add(kBase, d)});
  });
  VectorType vt = kb.vec(bf16(kb), kRows);
  Value vBase = kb.add(packedAt(kb, a, b, hk, p.dv, kb.idx(0), p.keys), row);
  Value every = kb.firstLanes(kb.idx(kRows), kRows);
  kb.forLoop(kb.idx(0), p.dv, kRows, [&](KernelBuilder &in, Value d) {
    Value mask = in.firstLanes(in.sub(a.nDv, d), kRows);
    Value v = readRowVector(in, vt, a.v, seg, b, hk, row, d, mask);
    in.scatter(v, p.v, {in.add(vBase, in.mul(d, p.keys))}, vOffsets, every);
  });
}

} // namespace

AmxOperands packForAmx(KernelBuilder &kb, const AttentionInfo &a, const FlashSchedule &s) {
  ImplicitLocOpBuilder &ib = kb.builder();
  AmxOperands p;
  // A cache view's key tiles start where its segments do (the stored length, anywhere),
  // and their blocks of 32 keys may read up to 31 rows past S: one more tile of zeros.
  Value nKT = kb.ceilDiv(a.nS, s.kvTile);
  if (a.k.cached())
    nKT = kb.add(nKT, kb.idx(1));
  p.keys = kb.mul(nKT, s.kvTile);
  p.dh = roundUp(kb, a.nDh, kDepth);
  p.dv = roundUp(kb, a.nDv, 2 * kRows);
  Value heads = kb.mul(a.nB, a.nHk);
  auto alloc = [&](Value size) {
    return memref::AllocOp::create(ib, MemRefType::get({ShapedType::kDynamic}, bf16(kb)),
                                   ValueRange{size}, ValueRange{}, ib.getI64IntegerAttr(64))
        .getResult();
  };
  p.k = alloc(kb.mul(kb.mul(heads, p.keys), p.dh));
  p.v = alloc(kb.mul(kb.mul(heads, p.dv), p.keys));
  // Lane i of a packed V column is head dim i of it: `keys` elements apart.
  auto lanes = VectorType::get({kRows}, ib.getIndexType());
  Value vOffsets = arith::MulIOp::create(ib, vector::StepOp::create(ib, lanes), kb.splat(p.keys, lanes));
  kb.parallel({a.nB, a.nHk, nKT}, [&](KernelBuilder &in, ValueRange iv) {
    Value b = iv[0], hk = iv[1], j0 = in.mul(iv[2], s.kvTile), j1 = in.add(j0, s.kvTile);
    // The tile's rows segment by segment (the operand's own rows are one), zeros past S.
    SmallVector<KeySegment> segs = keySegments(in, a, b);
    segs.push_back(KeySegment{KeySegment::Zeros, a.nS, p.keys, Value()});
    for (const KeySegment &seg : segs)
      in.forLoop(in.max(j0, seg.begin), in.min(j1, seg.end), 1, [&](KernelBuilder &x, Value row) {
        packKeyRow(x, a, p, seg, vOffsets, b, hk, row);
      });
  });
  return p;
}

void freeAmxOperands(KernelBuilder &kb, const AmxOperands &p) {
  memref::DeallocOp::create(kb.builder(), p.k);
  memref::DeallocOp::create(kb.builder(), p.v);
}

void zeroQueryPadAmx(KernelBuilder &kb, const AttentionInfo &a, const FlashSchedule &s,
                     const TileBuffers &t) {
  VectorType vt = kb.vec(bf16(kb), 2 * s.lanes);
  Value zero = kb.fconst(vt, 0.0);
  kb.forLoop(kb.ceilDiv(a.nDh, 2), kb.divu(t.amx.dh, kb.idx(2)), 1, [&](KernelBuilder &in, Value dp) {
    for (int64_t c = 0; c < 2 * s.qTile; c += 2 * s.lanes)
      in.vstore(zero, t.qT, {dp, in.idx(c)});
  });
}

void tileScoresAmx(KernelBuilder &kb, const AttentionInfo &a, const FlashSchedule &s,
                   const TileBuffers &t, Value b, Value hk, Value j0, Value cols) {
  auto operand = amx::TileType::get({kRows, kDepth}, bf16(kb));
  auto accType = amx::TileType::get({kRows, kRows}, a.ft);
  Value steps = kb.divu(t.amx.dh, kb.idx(kDepth));
  Value kStride = t.amx.dh;
  // Blocks of 32 keys up to the tile's last key; the rows past it are never read.
  kb.forLoop(kb.idx(0), kb.ceilDiv(cols, 2 * kRows), 1, [&](KernelBuilder &in, Value mb) {
    Value r0 = in.mul(mb, 2 * kRows);
    Value base = packedAt(in, a, b, hk, t.amx.keys, in.add(j0, r0), kStride);
    for (int64_t nb = 0; nb < s.qTile / (2 * kRows); ++nb) {
      // One tilezero per accumulator: a shared one is copied through the stack, a 1 KiB
      // tile store that each copy's load must wait for.
      SmallVector<Value> zeros;
      for (int q = 0; q < 4; ++q)
        zeros.push_back(amx::TileZeroOp::create(in.builder(), accType));
      SmallVector<Value> acc = emitAmxBlock(
          in, steps, zeros,
          [&](KernelBuilder &x, int64_t r, Value k) {
            Value at = x.add(base, x.mul(k, kDepth));
            if (r)
              at = x.add(at, x.mul(kStride, kRows));
            return amx::TileLoadOp::create(x.builder(), operand, t.amx.k, ValueRange{at}, kStride)
                .getResult();
          },
          [&](KernelBuilder &x, Value k, int64_t c) { return pairsTile(x, t.qT, k, nb, c); });
      storeBlock(in, t.sT, r0, nb * 2 * kRows, acc);
    }
  });
}

void tileValuesAmx(KernelBuilder &kb, const AttentionInfo &a, const FlashSchedule &s,
                   const TileBuffers &t, Value b, Value hk, Value j0, Value cols) {
  auto operand = amx::TileType::get({kRows, kDepth}, bf16(kb));
  auto accType = amx::TileType::get({kRows, kRows}, a.ft);
  Value steps = kb.ceilDiv(cols, kDepth);
  // pT's pairs past the tile's keys, up to the last whole tile of 32 keys, are zeros.
  VectorType ht = kb.vec(bf16(kb), 2 * s.lanes);
  Value zero = kb.fconst(ht, 0.0);
  kb.forLoop(kb.ceilDiv(cols, 2), kb.mul(steps, kRows), 1, [&](KernelBuilder &in, Value jp) {
    for (int64_t c = 0; c < 2 * s.qTile; c += 2 * s.lanes)
      in.vstore(zero, t.pT, {jp, in.idx(c)});
  });
  // oT *= corr, every row the tiles cover.
  VectorType vt = kb.vec(a.ft, s.lanes);
  SmallVector<Value> corr;
  for (int64_t c = 0; c < s.qTile; c += s.lanes)
    corr.push_back(kb.vload(vt, t.corr, {kb.idx(c)}));
  kb.forLoop(kb.idx(0), t.amx.dv, 1, [&](KernelBuilder &in, Value d) {
    for (int64_t c = 0; c < s.qTile / s.lanes; ++c) {
      Value o = in.vload(vt, t.oT, {d, in.idx(c * s.lanes)});
      in.vstore(arith::MulFOp::create(in.builder(), o, corr[c]), t.oT, {d, in.idx(c * s.lanes)});
    }
  });
  Value vStride = t.amx.keys;
  kb.forLoop(kb.idx(0), t.amx.dv, 2 * kRows, [&](KernelBuilder &in, Value d0) {
    Value base = packedAt(in, a, b, hk, t.amx.dv, d0, vStride);
    for (int64_t nb = 0; nb < s.qTile / (2 * kRows); ++nb) {
      SmallVector<Value> init;
      for (int64_t q = 0; q < 4; ++q)
        init.push_back(amx::TileLoadOp::create(
            in.builder(), accType, t.oT,
            ValueRange{in.add(d0, (q / 2) * kRows), in.idx(nb * 2 * kRows + (q % 2) * kRows)}));
      SmallVector<Value> acc = emitAmxBlock(
          in, steps, init,
          [&](KernelBuilder &x, int64_t r, Value k) {
            Value at = x.add(x.add(base, j0), x.mul(k, kDepth));
            if (r)
              at = x.add(at, x.mul(vStride, kRows));
            return amx::TileLoadOp::create(x.builder(), operand, t.amx.v, ValueRange{at}, vStride)
                .getResult();
          },
          [&](KernelBuilder &x, Value k, int64_t c) { return pairsTile(x, t.pT, k, nb, c); });
      storeBlock(in, t.oT, d0, nb * 2 * kRows, acc);
    }
  });
}

} // namespace qkv::ir
