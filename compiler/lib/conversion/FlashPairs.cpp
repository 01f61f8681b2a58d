// The tiled attention kernel's products on the avx512bf16 tier (FlashSchedule::dot): bf16
// pairs on vdpbf16ps with f32 accumulation, as FlashAttention-2 does on tensor cores.
//
//   QK^T  the query tile is packed once per task as pairs of head dims, query by query
//         (qT[dp][2 i + t] = q[i][2 dp + t], bf16 as it is, unscaled: the softmax scale is
//         applied to the f32 scores, so q's values are never rounded); each key row's pair
//         (k[j][2 dp], k[j][2 dp + 1]) is read where the row is and broadcast.
//   P.V   the probabilities, computed in f32, are rounded to bf16 and stored as pairs of
//         keys (pT[jp][2 i + t] = p[2 jp + t][i]); V's rows are packed per key tile as
//         pairs of keys (vP[jp][2 d + t] = v[2 jp + t][d]), whose pair for head dim d is
//         broadcast. The running sum l adds the unrounded probabilities.
//
// Odd sizes: a zero pairs past an odd Dh (in qT) or an odd number of keys (in pT and
// vP), and a key row's last pair past an odd Dh is read with its second element masked.
#include "FlashAttention.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "Microkernel.h"
#include "VectorMath.h"

using namespace mlir;

namespace qkv::ir {

namespace {

Type bf16(KernelBuilder &kb) { return kb.builder().getBF16Type(); }

/// The exp2 polynomial's degree for probabilities rounded to bf16 (VectorMath.h).
constexpr int kPairsExpDegree = 4;

Value notPast(KernelBuilder &kb, Value mask, Value inside) {
  return arith::AndIOp::create(kb.builder(), mask, kb.splat(inside, mask.getType()));
}

} // namespace

void packQueryPairs(KernelBuilder &kb, const AttentionInfo &a, const FlashSchedule &s,
                    const TileBuffers &t, Value b, Value h, Value i0, Value rows) {
  VectorType vt = kb.vec(bf16(kb), s.lanes);
  Value lastQ = kb.sub(a.nL, kb.idx(1)), lastD = kb.sub(a.nDh, kb.idx(1));
  Value offsets = rowOffsets(kb, a.q, s.lanes);
  kb.forLoop(kb.idx(0), kb.idx(s.qTile), s.lanes, [&](KernelBuilder &in, Value ib) {
    Value row = in.min(in.add(i0, ib), lastQ);
    Value valid = in.firstLanes(in.sub(rows, ib), s.lanes);
    in.forLoop(in.idx(0), in.ceilDiv(a.nDh, 2), 1, [&](KernelBuilder &x, Value dp) {
      Value d0 = x.mul(dp, 2), d1 = x.add(d0, 1);
      Value second = notPast(x, valid, x.cmp(arith::CmpIPredicate::slt, d1, a.nDh));
      Value v0 = gatherAs(x, vt, a.q, a.q.at(x, b, h, row, d0), offsets, valid);
      Value v1 = gatherAs(x, vt, a.q, a.q.at(x, b, h, row, x.min(d1, lastD)), offsets, second);
      x.vstore(vector::InterleaveOp::create(x.builder(), v0, v1), t.qT, {dp, x.mul(ib, 2)});
    });
  });
}

void tileScorePairs(KernelBuilder &kb, const AttentionInfo &a, const FlashSchedule &s,
                    const TileBuffers &t, const KeySegment &seg, Value b, Value hk, Value j0,
                    Value cols, bool fullTile) {
  GemmSpec g;
  g.elem = a.ft;
  g.lanes = s.lanes;
  g.nc = s.qTile / s.lanes;
  g.mr = gemmRowsFor(g.nc, s.registers);
  g.M = cols;
  if (fullTile)
    g.staticM = s.kvTile;
  g.dot = true;
  g.K = kb.divu(a.nDh, kb.idx(2)); // whole pairs; an odd Dh's last dim after them
  VectorType pair = kb.vec(bf16(kb), 2), bt = kb.vec(bf16(kb), 2 * s.lanes);
  g.a = [&](KernelBuilder &in, Value i, Value dp) {
    return readRowVector(in, pair, a.k, seg, b, hk, in.add(j0, i), in.mul(dp, 2), nullptr);
  };
  if (!a.staticDh || *a.staticDh % 2 != 0) {
    g.tail = kb.cmp(arith::CmpIPredicate::ne, kb.remu(a.nDh, kb.idx(2)), kb.idx(0));
    Value first = kb.firstLanes(kb.idx(1), 2);
    g.aTail = [&, first](KernelBuilder &in, Value i) {
      return readRowVector(in, pair, a.k, seg, b, hk, in.add(j0, i), in.mul(g.K, 2), first);
    };
  }
  g.b = [&](KernelBuilder &in, Value dp, int64_t c) {
    return in.vload(bt, t.qT, {dp, in.idx(c * 2 * s.lanes)});
  };
  VectorType vt = kb.vec(a.ft, s.lanes);
  g.init = [&](KernelBuilder &in, Value, int64_t) { return in.fconst(vt, 0.0); };
  g.store = [&](KernelBuilder &in, Value i, int64_t c, Value v) {
    in.vstore(v, t.sT, {i, in.idx(c * s.lanes)});
  };
  emitGemm(kb, g);
}

Value probabilityPairs(KernelBuilder &kb, const FlashSchedule &s, const TileBuffers &t, Value c,
                       Value cols, Value mUse, Value scale) {
  ImplicitLocOpBuilder &ib = kb.builder();
  VectorType vt = kb.vec(ib.getF32Type(), s.lanes), ht = kb.vec(bf16(kb), s.lanes);
  // P is rounded to bf16 (8 bits) for P.V: a degree-4 exp2 (2^-14.5) is exact enough.
  Value negM = scale ? arith::NegFOp::create(ib, mUse).getResult() : Value();
  auto p = [&](KernelBuilder &in, Value j) {
    Value sc = in.vload(vt, t.sT, {j, c});
    Value x = scale ? math::FmaOp::create(in.builder(), sc, scale, negM).getResult()
                    : arith::SubFOp::create(in.builder(), sc, mUse).getResult();
    return emitExp2(in, x, kPairsExpDegree);
  };
  auto store = [&](KernelBuilder &in, Value jp, Value p0, Value p1) {
    Value h0 = arith::TruncFOp::create(in.builder(), ht, p0);
    Value h1 = arith::TruncFOp::create(in.builder(), ht, p1);
    in.vstore(vector::InterleaveOp::create(in.builder(), h0, h1), t.pT, {jp, in.mul(c, 2)});
  };
  Value whole = kb.divu(cols, kb.idx(2));
  Value sum = kb.forLoop(kb.idx(0), whole, kb.idx(1), {kb.fconst(vt, 0.0)},
                         [&](KernelBuilder &in, Value jp, ValueRange acc) {
                           Value j = in.mul(jp, 2);
                           Value p0 = p(in, j), p1 = p(in, in.add(j, 1));
                           store(in, jp, p0, p1);
                           Value both = arith::AddFOp::create(in.builder(), p0, p1);
                           return SmallVector<Value>{arith::AddFOp::create(in.builder(), acc[0], both)};
                         })[0];
  // An odd number of keys: the last one paired with 0.
  Value odd = kb.cmp(arith::CmpIPredicate::ne, kb.remu(cols, kb.idx(2)), kb.idx(0));
  auto last = scf::IfOp::create(ib, TypeRange{vt}, odd, /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(ib);
    ib.setInsertionPointToStart(last.thenBlock());
    KernelBuilder in(ib);
    Value p0 = p(in, in.sub(cols, in.idx(1)));
    store(in, whole, p0, in.fconst(vt, 0.0));
    scf::YieldOp::create(ib, ValueRange{arith::AddFOp::create(ib, sum, p0).getResult()});
    ib.setInsertionPointToStart(last.elseBlock());
    scf::YieldOp::create(ib, ValueRange{sum});
  }
  return last.getResult(0);
}

namespace {

/// vP[jp][2 d + t] = V[b, hk, j0 + 2 jp + t, d] for the tile's keys, bf16 as stored; zero
/// past an odd number of keys and past Dv.
void packValuePairs(KernelBuilder &kb, const AttentionInfo &a, const FlashSchedule &s,
                    const TileBuffers &t, const KeySegment &seg, Value b, Value hk, Value j0,
                    Value cols) {
  VectorType ht = kb.vec(bf16(kb), s.lanes);
  kb.forLoop(kb.idx(0), kb.ceilDiv(cols, 2), 1, [&](KernelBuilder &in, Value jp) {
    Value j = in.mul(jp, 2);
    Value second = in.cmp(arith::CmpIPredicate::slt, in.add(j, 1), cols);
    Value r0 = in.add(j0, j);
    // Past the keys the row is never read (its lanes are off), but a paged cache's block
    // table is: stay on the tile's own row.
    Value r1 = arith::SelectOp::create(in.builder(), second, in.add(r0, 1), r0);
    in.forLoop(in.idx(0), a.nDv, s.lanes, [&](KernelBuilder &x, Value d) {
      Value mask = x.firstLanes(x.sub(a.nDv, d), s.lanes);
      Value v0 = readRowVector(x, ht, a.v, seg, b, hk, r0, d, mask);
      Value v1 = readRowVector(x, ht, a.v, seg, b, hk, r1, d, notPast(x, mask, second));
      x.vstore(vector::InterleaveOp::create(x.builder(), v0, v1), t.vP, {jp, x.mul(d, 2)});
    });
  });
}

} // namespace

void tileValuePairs(KernelBuilder &kb, const AttentionInfo &a, const FlashSchedule &s,
                    const TileBuffers &t, const KeySegment &seg, Value b, Value hk, Value j0,
                    Value cols) {
  packValuePairs(kb, a, s, t, seg, b, hk, j0, cols);
  GemmSpec g;
  g.elem = a.ft;
  g.lanes = s.lanes;
  g.nc = s.qTile / s.lanes;
  g.mr = gemmRowsFor(g.nc, s.registers);
  // A static Dv in whole register tiles, as the f32 kernel (tileValues) takes it.
  if (a.staticDv)
    for (int64_t r = g.mr; r >= 4; --r)
      if (*a.staticDv % r == 0) {
        g.mr = r;
        break;
      }
  g.M = a.nDv;
  g.staticM = a.staticDv;
  g.K = kb.ceilDiv(cols, 2);
  g.dot = true;
  VectorType vt = kb.vec(a.ft, s.lanes), pair = kb.vec(bf16(kb), 2),
             bt = kb.vec(bf16(kb), 2 * s.lanes);
  SmallVector<Value> corr;
  for (int64_t c = 0; c < g.nc; ++c)
    corr.push_back(kb.vload(vt, t.corr, {kb.idx(c * s.lanes)}));
  g.a = [&](KernelBuilder &in, Value d, Value jp) {
    return in.vload(pair, t.vP, {jp, in.mul(d, 2)});
  };
  g.b = [&](KernelBuilder &in, Value jp, int64_t c) {
    return in.vload(bt, t.pT, {jp, in.idx(c * 2 * s.lanes)});
  };
  g.init = [&](KernelBuilder &in, Value i, int64_t c) {
    Value o = in.vload(vt, t.oT, {i, in.idx(c * s.lanes)});
    return arith::MulFOp::create(in.builder(), o, corr[c]).getResult();
  };
  g.store = [&](KernelBuilder &in, Value i, int64_t c, Value v) {
    in.vstore(v, t.oT, {i, in.idx(c * s.lanes)});
  };
  emitGemm(kb, g);
}

} // namespace qkv::ir
