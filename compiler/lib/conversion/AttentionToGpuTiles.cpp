// qkv-lower-attention-to-gpu-tiles: qkv.attention -> the tiled kernel of the CUDA
// pipeline, written before it is mapped to blocks and threads, so the CPU can run the same
// IR (the `tiled` stage; docs/gpu.md). One scf.forall iteration per (query tile, head,
// batch) is a thread block; inside it, scf.foralls of q-tile iterations are its threads,
// one query row each, and run one after the other (a barrier between them on the GPU):
//   initialise the row's running max, sum and output accumulator;
//   for each tile of kv-tile keys that the mask does not prove empty (the CPU kernel's
//     tile classification): the threads copy the key and value rows into the block's
//     buffers (shared memory on the GPU), then each thread scores its query against the
//     tile (the mods inlined, scalar; no mask code in a tile the mask proves full), takes
//     the online-softmax step and accumulates p . v;
//   each thread divides its row by the sum and writes it.
// Buffers marked `qkv.workgroup` are per block (shared memory); the others per thread.
// That is f32 SIMT code. An f16/bf16 attention takes the tensor-core form instead (mmaTile
// below): the block's tiles are staged in the half type, and warp foralls compute S = Q K^T
// and P V as vector.contract ops of mma.sync's 16x8x16 shape, which convert-vector-to-gpu
// distributes over the warp's lanes; the threads take the softmax step between them.
#include "FlashAttention.h"

#include <cmath>
#include <limits>

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "qkv/compiler/transforms/Passes.h"

namespace qkv::ir {
#define GEN_PASS_DEF_LOWERATTENTIONTOGPUTILES
#include "qkv/compiler/transforms/Passes.h.inc"
} // namespace qkv::ir

using namespace mlir;
using namespace qkv::ir;

namespace {

struct GpuTiles {
  int64_t rows; // query rows per block = threads per block
  int64_t keys; // keys per tile
  int64_t dh, dv;
  Type half;    // the tensor-core form's element type (f16 or bf16); null: f32 SIMT
  /// Bytes of the block's buffers (shared memory) for operands of `elemBytes` each.
  int64_t sharedBytes(int64_t elemBytes) const {
    if (!half)
      return elemBytes * (2 * rows + rows * dv + keys * (dh + dv));
    // f32 max, sum, accumulator and scores; half-type Q, K, V and P tiles.
    return 4 * (2 * rows + rows * dv + rows * keys) +
           2 * (rows * dh + keys * (dh + dv) + rows * keys);
  }
};

/// The MMA shape (mma.sync m16n8k16): a warp's tile of rows, and the n and k steps.
constexpr int64_t kMmaM = 16, kMmaN = 8, kMmaK = 16;

/// scf.forall over [0, ub_i) with the given GPU mapping; body(ivs).
void forall(KernelBuilder &kb, ArrayRef<Value> ubs, ArrayRef<Attribute> mapping,
            const std::function<void(KernelBuilder &, ValueRange)> &body) {
  ImplicitLocOpBuilder &ib = kb.builder();
  SmallVector<OpFoldResult> bounds(ubs.begin(), ubs.end());
  auto op = scf::ForallOp::create(ib, bounds, ValueRange{}, ib.getArrayAttr(mapping));
  OpBuilder::InsertionGuard guard(ib);
  ib.setInsertionPoint(op.getBody()->getTerminator());
  KernelBuilder in(ib);
  body(in, op.getInductionVars());
}

/// The block's threads, one iteration each.
void threads(KernelBuilder &kb, const GpuTiles &t,
             const std::function<void(KernelBuilder &, Value)> &body) {
  Attribute x = gpu::GPUThreadMappingAttr::get(kb.ctx(), gpu::MappingId::DimX);
  forall(kb, {kb.idx(t.rows)}, {x}, [&](KernelBuilder &in, ValueRange iv) { body(in, iv[0]); });
}

/// The block's warps, one iteration each, kMmaM query rows per warp: the body is
/// warp-level code, which all the warp's lanes run together on the GPU.
void warps(KernelBuilder &kb, const GpuTiles &t,
           const std::function<void(KernelBuilder &, Value)> &body) {
  Attribute x = gpu::GPUWarpMappingAttr::get(kb.ctx(), gpu::MappingId::DimX);
  forall(kb, {kb.idx(t.rows / kMmaM)}, {x},
         [&](KernelBuilder &in, ValueRange iv) { body(in, iv[0]); });
}

/// `v` rounded to the tensor-core form's half type (unchanged in the SIMT form).
Value narrow(KernelBuilder &kb, const GpuTiles &t, Value v) {
  return t.half ? arith::TruncFOp::create(kb.builder(), t.half, v).getResult() : v;
}

/// A per-block buffer (shared memory on the GPU).
Value blockBuffer(KernelBuilder &kb, Type elem, ArrayRef<int64_t> shape) {
  Value buf = kb.stackBuffer(elem, shape, {});
  buf.getDefiningOp()->setAttr("qkv.workgroup", kb.builder().getUnitAttr());
  return buf;
}

/// then() where `cond` holds, otherwise() elsewhere: one value of type t.
Value choose(KernelBuilder &kb, Value cond, Type t,
             const std::function<Value(KernelBuilder &)> &then,
             const std::function<Value(KernelBuilder &)> &otherwise) {
  ImplicitLocOpBuilder &ib = kb.builder();
  auto op = scf::IfOp::create(ib, TypeRange{t}, cond, /*withElse=*/true);
  OpBuilder::InsertionGuard guard(ib);
  ib.setInsertionPointToStart(&op.getThenRegion().front());
  KernelBuilder in(ib);
  scf::YieldOp::create(ib, then(in));
  ib.setInsertionPointToStart(&op.getElseRegion().front());
  scf::YieldOp::create(ib, otherwise(in));
  return op.getResult(0);
}

/// The value `compute` yields when `cond` holds, else `otherwise` (nothing is read when
/// the condition fails).
Value readIf(KernelBuilder &kb, Value cond, Type t,
             const std::function<Value(KernelBuilder &)> &compute, Value otherwise) {
  return choose(kb, cond, t, compute, [&](KernelBuilder &) { return otherwise; });
}

/// Element (b, h, row, col) of keys or values, 0 past the key axis, read from the
/// segment the row falls in.
Value readKeyRow(KernelBuilder &kb, const AttentionInfo &a, const RowSource &src,
                 ArrayRef<KeySegment> segs, Value b, Value hk, Value row, Value col) {
  Value zero = kb.fconst(a.ft, 0.0);
  std::function<Value(KernelBuilder &, size_t)> from = [&](KernelBuilder &in, size_t i) {
    if (i == segs.size() || segs[i].kind == KeySegment::Zeros)
      return zero;
    Value inside = in.cmp(arith::CmpIPredicate::ult, row, segs[i].end);
    return readIf(
        in, inside, a.ft,
        [&](KernelBuilder &k2) { return readRow(k2, a.ft, src, segs[i], b, hk, row, col); },
        i + 1 < segs.size() ? from(in, i + 1) : zero);
  };
  return from(kb, 0);
}

/// The threads copy the key tile starting at kv0 into ks and the value tile into vs.
void stageKeys(KernelBuilder &kb, const AttentionInfo &a, const GpuTiles &t,
               ArrayRef<KeySegment> segs, Value b, Value hk, Value kv0, Value ks, Value vs) {
  threads(kb, t, [&](KernelBuilder &in, Value tid) {
    in.forLoop(tid, in.idx(t.keys), t.rows, [&](KernelBuilder &in2, Value r) {
      Value row = in2.add(kv0, r);
      in2.forLoop(in2.idx(0), in2.idx(t.dh), 1, [&](KernelBuilder &in3, Value c) {
        in3.store(narrow(in3, t, readKeyRow(in3, a, a.k, segs, b, hk, row, c)), ks, {r, c});
      });
      in2.forLoop(in2.idx(0), in2.idx(t.dv), 1, [&](KernelBuilder &in3, Value c) {
        in3.store(narrow(in3, t, readKeyRow(in3, a, a.v, segs, b, hk, row, c)), vs, {r, c});
      });
    });
  });
}

Value maxf(ImplicitLocOpBuilder &ib, Value x, Value y) {
  // A compare and select: a NaN score does not become the max (the interpreter's NaN
  // then reaches the sum and the output through p).
  Value gt = arith::CmpFOp::create(ib, arith::CmpFPredicate::OGT, x, y);
  return arith::SelectOp::create(ib, gt, x, y);
}

struct RowState {
  Value m, l, acc; // per block: running max (log2 units), sum, output accumulator
};

/// One thread's online-softmax step over the key tile at kv0 for query row qi: where it
/// reads the raw dot products q . k_j, keeps its scores and puts each p_j.
struct RowStep {
  Value b, h, tid, qi, kv0;
  std::optional<Value> full; // when known: the mask keeps the whole tile (no mask code)
  Value scores;              // the row's scores are scores[at..., j]
  SmallVector<Value, 1> at;
  std::function<Value(KernelBuilder &, Value)> dot;        // q . k_j
  std::function<void(KernelBuilder &, Value, Value)> use; // p_j, after the rescale
};

/// The row's scores in log2 units (masked and past the keys: -inf) into r.scores; returns
/// their max with the running one.
Value scoreRow(KernelBuilder &kb, const AttentionInfo &a, const GpuTiles &t, const RowStep &r,
               Value mOld) {
  ImplicitLocOpBuilder &ib = kb.builder();
  Value ninf = kb.fconst(a.ft, -std::numeric_limits<double>::infinity());
  // Without a score mod the scale folds into log2 units now; with one, the mod sees
  // scale * q.k and emitScoreAndMask converts.
  Value factor = a.score ? a.scale : arith::MulFOp::create(ib, a.scale, kb.fconst(a.ft, M_LOG2E));
  return kb.forLoop(kb.idx(0), kb.idx(t.keys), kb.idx(1), {mOld},
                    [&](KernelBuilder &in, Value j, ValueRange acc) {
    Value kv = in.add(r.kv0, j);
    Value live = in.cmp(arith::CmpIPredicate::ult, kv, a.nS);
    Value s = readIf(in, live, a.ft, [&](KernelBuilder &in2) {
      Value raw = arith::MulFOp::create(in2.builder(), r.dot(in2, j), factor);
      auto score = [&](bool withMask) {
        return [&, withMask](KernelBuilder &in3) {
          return emitScoreAndMask(in3, a, raw, r.b, r.h, r.qi, kv, withMask, 1);
        };
      };
      if (!a.mask || !r.full)
        return score(a.mask != nullptr)(in2);
      return choose(in2, *r.full, a.ft, score(false), score(true));
    }, ninf);
    SmallVector<Value, 2> at(r.at.begin(), r.at.end());
    at.push_back(j);
    in.store(s, r.scores, at);
    return SmallVector<Value>{maxf(in.builder(), s, acc[0])};
  })[0];
}

/// The online-softmax step: new max, the accumulator and sum rescaled, p_j to r.use.
void softmaxStep(KernelBuilder &kb, const AttentionInfo &a, const GpuTiles &t,
                 const RowState &st, const RowStep &r) {
  ImplicitLocOpBuilder &ib = kb.builder();
  Value ninf = kb.fconst(a.ft, -std::numeric_limits<double>::infinity());
  Value mOld = kb.load(st.m, {r.tid});
  Value mx = scoreRow(kb, a, t, r, mOld);
  // A row with nothing kept so far has max -inf: subtract 0 instead, so exp2 gives 0.
  Value none = arith::CmpFOp::create(ib, arith::CmpFPredicate::OEQ, mx, ninf);
  Value mUse = arith::SelectOp::create(ib, none, kb.fconst(a.ft, 0.0), mx);
  Value corr = math::Exp2Op::create(ib, arith::SubFOp::create(ib, mOld, mUse));
  kb.forLoop(kb.idx(0), kb.idx(t.dv), 1, [&](KernelBuilder &in, Value c) {
    in.store(arith::MulFOp::create(in.builder(), in.load(st.acc, {r.tid, c}), corr), st.acc,
             {r.tid, c});
  });
  Value lOld = arith::MulFOp::create(ib, kb.load(st.l, {r.tid}), corr);
  Value lNew = kb.forLoop(kb.idx(0), kb.idx(t.keys), kb.idx(1), {lOld},
                          [&](KernelBuilder &in, Value j, ValueRange sum) {
    ImplicitLocOpBuilder &b2 = in.builder();
    SmallVector<Value, 2> at(r.at.begin(), r.at.end());
    at.push_back(j);
    Value p = math::Exp2Op::create(b2, arith::SubFOp::create(b2, in.load(r.scores, at), mUse));
    r.use(in, j, p);
    return SmallVector<Value>{arith::AddFOp::create(b2, sum[0], p)};
  })[0];
  kb.store(mx, st.m, {r.tid});
  kb.store(lNew, st.l, {r.tid});
}

/// The SIMT form's step for one thread: it computes its dot products and accumulates p . v.
void scoreTile(KernelBuilder &kb, const AttentionInfo &a, const GpuTiles &t, const RowState &st,
               RowStep r, Value ks, Value vs) {
  r.scores = kb.stackBuffer(a.ft, {t.keys}, {});
  r.dot = [&](KernelBuilder &in, Value j) {
    return in.forLoop(in.idx(0), in.idx(t.dh), in.idx(1), {in.fconst(a.ft, 0.0)},
                      [&](KernelBuilder &in2, Value c, ValueRange sum) {
      Value qv = loadAs(in2, a.ft, a.q, a.q.at(in2, r.b, r.h, r.qi, c));
      Value prod = arith::MulFOp::create(in2.builder(), qv, in2.load(ks, {j, c}));
      return SmallVector<Value>{arith::AddFOp::create(in2.builder(), sum[0], prod)};
    })[0];
  };
  r.use = [&](KernelBuilder &in, Value j, Value p) {
    in.forLoop(in.idx(0), in.idx(t.dv), 1, [&](KernelBuilder &in2, Value c) {
      ImplicitLocOpBuilder &b3 = in2.builder();
      Value pv = arith::MulFOp::create(b3, p, in2.load(vs, {j, c}));
      in2.store(arith::AddFOp::create(b3, in2.load(st.acc, {r.tid, c}), pv), st.acc,
                {r.tid, c});
    });
  };
  softmaxStep(kb, a, t, st, r);
}

/// Each thread writes its row: the accumulator over the sum (0 for a row with nothing kept).
void writeRows(KernelBuilder &kb, const AttentionInfo &a, const GpuTiles &t, const RowState &st,
               Value b, Value h, Value q0) {
  threads(kb, t, [&](KernelBuilder &in, Value tid) {
    Value qi = in.add(q0, tid);
    in.ifThen(in.cmp(arith::CmpIPredicate::ult, qi, a.nL), [&](KernelBuilder &in2) {
      ImplicitLocOpBuilder &ib = in2.builder();
      Value l = in2.load(st.l, {tid});
      Value zero = in2.fconst(a.ft, 0.0);
      Value empty = arith::CmpFOp::create(ib, arith::CmpFPredicate::OEQ, l, zero);
      Value inv = arith::SelectOp::create(
          ib, empty, zero, arith::DivFOp::create(ib, in2.fconst(a.ft, 1.0), l));
      in2.forLoop(in2.idx(0), in2.idx(t.dv), 1, [&](KernelBuilder &in3, Value c) {
        Value o = arith::MulFOp::create(in3.builder(), in3.load(st.acc, {tid, c}), inv);
        in3.store(o, a.out.mem, a.out.at(in3, b, h, qi, c));
      });
    });
  });
}

/// The rows x cols tile of `mem` at (r, c), as a vector (warp-level: a fragment per lane
/// on the GPU).
Value readTile(KernelBuilder &kb, Value mem, Value r, Value c, int64_t rows, int64_t cols) {
  Type elem = cast<MemRefType>(mem.getType()).getElementType();
  Value pad = kb.fconst(elem, 0.0);
  return vector::TransferReadOp::create(kb.builder(), VectorType::get({rows, cols}, elem), mem,
                                        ValueRange{r, c}, pad, ArrayRef<bool>{true, true});
}

void writeTile(KernelBuilder &kb, Value tile, Value mem, Value r, Value c) {
  vector::TransferWriteOp::create(kb.builder(), tile, mem, ValueRange{r, c},
                                  ArrayRef<bool>{true, true});
}

/// acc + a . b for a (m x k) and b (n x k), or b (k x n) when `bByRows` is false: one
/// mma.sync on the GPU.
Value mmaStep(KernelBuilder &kb, Value a, Value b, Value acc, bool bByRows) {
  MLIRContext *ctx = kb.ctx();
  AffineExpr m = getAffineDimExpr(0, ctx), n = getAffineDimExpr(1, ctx),
             k = getAffineDimExpr(2, ctx);
  SmallVector<AffineExpr> bMap =
      bByRows ? SmallVector<AffineExpr>{n, k} : SmallVector<AffineExpr>{k, n};
  return vector::ContractionOp::create(
      kb.builder(), a, b, acc, ArrayRef<ArrayRef<AffineExpr>>{{m, k}, bMap, {m, n}},
      ArrayRef<vector::IteratorType>{vector::IteratorType::parallel,
                                     vector::IteratorType::parallel,
                                     vector::IteratorType::reduction});
}

/// The block's tensor-core buffers: the query tile, the scores and P (rows x keys).
struct MmaBuffers {
  Value qs, sc, ps;
};

/// Warp w's rows of S = Q K^T over the key tile in ks (f32, into mb.sc).
void mmaScores(KernelBuilder &kb, const GpuTiles &t, const MmaBuffers &mb, Value w, Value ks) {
  Value r0 = kb.mul(w, kMmaM);
  SmallVector<Value> q;
  for (int64_t k = 0; k < t.dh; k += kMmaK)
    q.push_back(readTile(kb, mb.qs, r0, kb.idx(k), kMmaM, kMmaK));
  Type f32 = kb.builder().getF32Type();
  auto accType = VectorType::get({kMmaM, kMmaN}, f32);
  for (int64_t n = 0; n < t.keys; n += kMmaN) {
    Value acc = arith::ConstantOp::create(kb.builder(), accType,
                                          DenseElementsAttr::get(accType, 0.0f));
    for (int64_t i = 0; i < static_cast<int64_t>(q.size()); ++i)
      acc = mmaStep(kb, q[i], readTile(kb, ks, kb.idx(n), kb.idx(i * kMmaK), kMmaN, kMmaK), acc,
                    /*bByRows=*/true);
    writeTile(kb, acc, mb.sc, r0, kb.idx(n));
  }
}

/// Warp w's rows of the accumulator += P V over the value tile in vs.
void mmaAccumulate(KernelBuilder &kb, const GpuTiles &t, const MmaBuffers &mb, Value w, Value vs,
                   Value accBuf) {
  Value r0 = kb.mul(w, kMmaM);
  SmallVector<Value> p;
  for (int64_t k = 0; k < t.keys; k += kMmaK)
    p.push_back(readTile(kb, mb.ps, r0, kb.idx(k), kMmaM, kMmaK));
  for (int64_t n = 0; n < t.dv; n += kMmaN) {
    Value acc = readTile(kb, accBuf, r0, kb.idx(n), kMmaM, kMmaN);
    for (int64_t i = 0; i < static_cast<int64_t>(p.size()); ++i)
      acc = mmaStep(kb, p[i], readTile(kb, vs, kb.idx(i * kMmaK), kb.idx(n), kMmaK, kMmaN), acc,
                    /*bByRows=*/false);
    writeTile(kb, acc, accBuf, r0, kb.idx(n));
  }
}

/// Where a block is: its batch, head, first query and first key of the current tile.
struct BlockAt {
  Value b, h, q0, kv0;
};

/// The tensor-core form's step over one key tile (staged in ks, vs): S by the warps, the
/// softmax step by the threads (p rounded to the half type into P), P V by the warps.
void mmaTile(KernelBuilder &kb, const AttentionInfo &a, const GpuTiles &t, const RowState &st,
             const MmaBuffers &mb, const BlockAt &at, std::optional<Value> full, Value ks,
             Value vs) {
  warps(kb, t, [&](KernelBuilder &in, Value w) { mmaScores(in, t, mb, w, ks); });
  threads(kb, t, [&](KernelBuilder &in, Value tid) {
    Value qi = in.add(at.q0, tid);
    in.ifThen(in.cmp(arith::CmpIPredicate::ult, qi, a.nL), [&](KernelBuilder &in2) {
      RowStep r{at.b, at.h, tid, qi, at.kv0, full, mb.sc, {tid}, nullptr, nullptr};
      r.dot = [&](KernelBuilder &x, Value j) { return x.load(mb.sc, {tid, j}); };
      r.use = [&](KernelBuilder &x, Value j, Value p) {
        x.store(narrow(x, t, p), mb.ps, {tid, j});
      };
      softmaxStep(in2, a, t, st, r);
    });
    // A row past the queries leaves its P row as it was: P V's rows are independent, and
    // that row of the accumulator is never written out.
  });
  warps(kb, t, [&](KernelBuilder &in, Value w) { mmaAccumulate(in, t, mb, w, vs, st.acc); });
}

/// The threads start their rows: max -inf, sum and accumulator 0; in the tensor-core form,
/// they also stage the block's query tile (0 past the queries).
void startRows(KernelBuilder &kb, const AttentionInfo &a, const GpuTiles &t, const RowState &st,
               const MmaBuffers &mb, const BlockAt &at) {
  threads(kb, t, [&](KernelBuilder &in, Value tid) {
    in.store(in.fconst(a.ft, -std::numeric_limits<double>::infinity()), st.m, {tid});
    in.store(in.fconst(a.ft, 0.0), st.l, {tid});
    in.forLoop(in.idx(0), in.idx(t.dv), 1, [&](KernelBuilder &in2, Value c) {
      in2.store(in2.fconst(a.ft, 0.0), st.acc, {tid, c});
    });
    if (!t.half)
      return;
    Value qi = in.add(at.q0, tid);
    Value inside = in.cmp(arith::CmpIPredicate::ult, qi, a.nL);
    in.forLoop(in.idx(0), in.idx(t.dh), 1, [&](KernelBuilder &in2, Value c) {
      Value v = readIf(in2, inside, a.ft, [&](KernelBuilder &x) {
        return loadAs(x, a.ft, a.q, a.q.at(x, at.b, at.h, qi, c));
      }, in2.fconst(a.ft, 0.0));
      in2.store(narrow(in2, t, v), mb.qs, {tid, c});
    });
  });
}

/// One block: a tile of t.rows queries of head h in sequence b.
void emitBlock(KernelBuilder &kb, const AttentionInfo &a, const GpuTiles &t, Value qt, Value h,
               Value b) {
  RowState st{blockBuffer(kb, a.ft, {t.rows}), blockBuffer(kb, a.ft, {t.rows}),
              blockBuffer(kb, a.ft, {t.rows, t.dv})};
  Type tileType = t.half ? t.half : a.ft;
  Value ks = blockBuffer(kb, tileType, {t.keys, t.dh});
  Value vs = blockBuffer(kb, tileType, {t.keys, t.dv});
  MmaBuffers mb;
  if (t.half)
    mb = {blockBuffer(kb, t.half, {t.rows, t.dh}), blockBuffer(kb, a.ft, {t.rows, t.keys}),
          blockBuffer(kb, t.half, {t.rows, t.keys})};
  Value q0 = kb.mul(qt, t.rows), hk = kb.divu(h, a.group);
  SmallVector<KeySegment> segs = keySegments(kb, a, b);
  startRows(kb, a, t, st, mb, BlockAt{b, h, q0, Value()});
  Value rows = kb.min(kb.idx(t.rows), kb.sub(a.nL, q0));
  kb.forLoop(kb.idx(0), kb.ceilDiv(a.nS, t.keys), 1, [&](KernelBuilder &in, Value kt) {
    Value kv0 = in.mul(kt, t.keys);
    auto work = [&](KernelBuilder &x, std::optional<Value> full) {
      stageKeys(x, a, t, segs, b, hk, kv0, ks, vs);
      if (t.half)
        return mmaTile(x, a, t, st, mb, BlockAt{b, h, q0, kv0}, full, ks, vs);
      threads(x, t, [&](KernelBuilder &in2, Value tid) {
        Value qi = in2.add(q0, tid);
        in2.ifThen(in2.cmp(arith::CmpIPredicate::ult, qi, a.nL), [&](KernelBuilder &in3) {
          scoreTile(in3, a, t, st, RowStep{b, h, tid, qi, kv0, full, Value(), {}, nullptr, nullptr},
                    ks, vs);
        });
      });
    };
    // The CPU kernel's block classification: a tile the mask proves empty is skipped by
    // the whole block (no loads, no barriers: the condition is the same for every
    // thread), a full one runs without mask code.
    Value cols = in.min(in.idx(t.keys), in.sub(a.nS, kv0));
    std::optional<TileClass> cls = classifyKeys(in, a, b, h, q0, rows, kv0, cols);
    if (!cls)
      return work(in, std::nullopt);
    Value keep = arith::XOrIOp::create(in.builder(), cls->empty,
                                       arith::ConstantOp::create(in.builder(),
                                                                 in.builder().getBoolAttr(true)));
    in.ifThen(keep, [&](KernelBuilder &x) { work(x, cls->full); });
  });
  writeRows(kb, a, t, st, b, h, q0);
}

/// The half type (f16 or bf16) q, k and v are all widened from, when they are.
Type widenedFrom(AttentionOp op) {
  Type half;
  for (Value v : {op.getQ(), op.getK(), op.getV()}) {
    Value src = unwidened(v);
    Type t = getElementTypeOrSelf(src.getType());
    if (src == v || (half && t != half) || !getElementTypeOrSelf(v.getType()).isF32())
      return Type();
    half = t;
  }
  return half;
}

/// The static shared memory a kernel may declare.
constexpr int64_t kSharedBytes = 48 * 1024;

/// `t` with its buffers within kSharedBytes: fewer rows per block, then fewer keys per
/// tile. The tensor-core form needs whole MMA tiles (rows and keys multiples of 16, head
/// dims of 16 and 8); where it cannot have them it is the SIMT form.
GpuTiles fit(GpuTiles t, int64_t elemBytes) {
  GpuTiles simt = t;
  simt.half = Type();
  int64_t minKeys = t.half ? kMmaK : 1;
  while (t.sharedBytes(elemBytes) > kSharedBytes && t.rows > 16)
    t.rows /= 2;
  while (t.sharedBytes(elemBytes) > kSharedBytes && t.keys > minKeys)
    t.keys /= 2;
  bool whole = t.dh % kMmaK == 0 && t.dv % kMmaN == 0 && t.rows % kMmaM == 0 &&
               t.keys % kMmaK == 0;
  if (t.half && (!whole || t.sharedBytes(elemBytes) > kSharedBytes))
    return fit(simt, elemBytes);
  return t;
}

struct GpuTilesLowering : OpRewritePattern<AttentionOp> {
  GpuTilesLowering(MLIRContext *ctx, int64_t rows, int64_t keys, bool mma)
      : OpRewritePattern(ctx), rows(rows), keys(keys), mma(mma) {}

  LogicalResult matchAndRewrite(AttentionOp op, PatternRewriter &rw) const override {
    auto qt = cast<RankedTensorType>(op.getQ().getType());
    auto vt = cast<RankedTensorType>(op.getV().getType());
    int64_t dh = qt.getShape().back(), dv = vt.getShape().back();
    if (ShapedType::isDynamic(dh) || ShapedType::isDynamic(dv))
      return op.emitError("the CUDA attention kernel needs static head dims (the block's "
                          "buffers have static sizes); q's is ")
             << (ShapedType::isDynamic(dh) ? std::string("dynamic") : std::to_string(dh))
             << ", v's " << (ShapedType::isDynamic(dv) ? std::string("dynamic") : std::to_string(dv));
    if (op.getLse())
      return op.emitError("the CUDA attention kernel does not compute the log-sum-exp "
                          "(attention_lse) yet; compile this graph for the CPU");
    ImplicitLocOpBuilder ib(op.getLoc(), rw);
    KernelBuilder kb(ib);
    AttentionInfo a = describe(kb, op);
    int64_t bytes = cast<RankedTensorType>(op.getQ().getType()).getElementTypeBitWidth() / 8;
    GpuTiles t = fit(GpuTiles{rows, keys, dh, dv, mma ? widenedFrom(op) : Type()}, bytes);
    if (t.sharedBytes(bytes) > kSharedBytes)
      return op.emitError("the CUDA attention kernel's block buffers do not fit in 48 KiB "
                          "of shared memory at head dims ")
             << dh << " and " << dv;
    auto block = [&](gpu::MappingId id) -> Attribute {
      return gpu::GPUBlockMappingAttr::get(kb.ctx(), id);
    };
    forall(kb, {kb.ceilDiv(a.nL, t.rows), a.nH, a.nB},
           {block(gpu::MappingId::DimX), block(gpu::MappingId::DimY), block(gpu::MappingId::DimZ)},
           [&](KernelBuilder &in, ValueRange iv) { emitBlock(in, a, t, iv[0], iv[1], iv[2]); });
    replaceWithOutput(rw, ib, op, a);
    return success();
  }

  int64_t rows, keys;
  bool mma;
};

struct LowerAttentionToGpuTilesPass
    : qkv::ir::impl::LowerAttentionToGpuTilesBase<LowerAttentionToGpuTilesPass> {
  using LowerAttentionToGpuTilesBase::LowerAttentionToGpuTilesBase;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<GpuTilesLowering>(&getContext(), qTile, kvTile, mma);
    GreedyRewriteConfig config;
    config.setStrictness(GreedyRewriteStrictness::ExistingOps);
    (void)applyPatternsGreedily(getOperation(), std::move(patterns), config);
    WalkResult left = getOperation().walk([](AttentionOp) { return WalkResult::interrupt(); });
    if (left.wasInterrupted())
      return signalPassFailure();
    // |x| of an index (a relative position in a mod) as max(x, -x): the NVVM conversion
    // has no math.absi on index.
    getOperation().walk([](math::AbsIOp abs) {
      if (!abs.getType().isIndex())
        return;
      ImplicitLocOpBuilder ib(abs.getLoc(), abs);
      Value x = abs.getOperand();
      Value neg = arith::SubIOp::create(ib, arith::ConstantIndexOp::create(ib, 0), x);
      abs.replaceAllUsesWith(arith::MaxSIOp::create(ib, x, neg).getResult());
      abs.erase();
    });
  }
};

} // namespace
