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
// f32 SIMT code: no tensor cores yet.
#include "FlashAttention.h"

#include <cmath>
#include <limits>

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
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
};

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
        [&](KernelBuilder &k2) { return readRow(k2, src, segs[i], b, hk, row, col); },
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
        in3.store(readKeyRow(in3, a, a.k, segs, b, hk, row, c), ks, {r, c});
      });
      in2.forLoop(in2.idx(0), in2.idx(t.dv), 1, [&](KernelBuilder &in3, Value c) {
        in3.store(readKeyRow(in3, a, a.v, segs, b, hk, row, c), vs, {r, c});
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

/// One thread's online-softmax step over the key tile at kv0 for query row qi. `full`
/// (when known) says the mask keeps the whole tile: the mask is not evaluated then.
void scoreTile(KernelBuilder &kb, const AttentionInfo &a, const GpuTiles &t, const RowState &st,
               Value b, Value h, Value tid, Value qi, Value kv0, Value ks, Value vs,
               std::optional<Value> full) {
  ImplicitLocOpBuilder &ib = kb.builder();
  Value ninf = kb.fconst(a.ft, -std::numeric_limits<double>::infinity());
  // Without a score mod the scale folds into log2 units now; with one, the mod sees
  // scale * q.k and emitScoreAndMask converts.
  Value factor = a.score ? a.scale : arith::MulFOp::create(ib, a.scale, kb.fconst(a.ft, M_LOG2E));
  Value scores = kb.stackBuffer(a.ft, {t.keys}, {});
  Value mOld = kb.load(st.m, {tid});
  Value mx = kb.forLoop(kb.idx(0), kb.idx(t.keys), kb.idx(1), {mOld},
                        [&](KernelBuilder &in, Value j, ValueRange acc) {
    Value kv = in.add(kv0, j);
    Value live = in.cmp(arith::CmpIPredicate::ult, kv, a.nS);
    Value s = readIf(in, live, a.ft, [&](KernelBuilder &in2) {
      Value dot = in2.forLoop(in2.idx(0), in2.idx(t.dh), in2.idx(1), {in2.fconst(a.ft, 0.0)},
                              [&](KernelBuilder &in3, Value c, ValueRange sum) {
        Value qv = in3.load(a.q.mem, a.q.at(in3, b, h, qi, c));
        Value prod = arith::MulFOp::create(in3.builder(), qv, in3.load(ks, {j, c}));
        return SmallVector<Value>{arith::AddFOp::create(in3.builder(), sum[0], prod)};
      })[0];
      Value raw = arith::MulFOp::create(in2.builder(), dot, factor);
      auto score = [&](bool withMask) {
        return [&, withMask](KernelBuilder &in3) {
          return emitScoreAndMask(in3, a, raw, b, h, qi, kv, withMask, 1);
        };
      };
      if (!a.mask || !full)
        return score(a.mask != nullptr)(in2);
      return choose(in2, *full, a.ft, score(false), score(true));
    }, ninf);
    in.store(s, scores, {j});
    return SmallVector<Value>{maxf(in.builder(), s, acc[0])};
  })[0];
  // A row with nothing kept so far has max -inf: subtract 0 instead, so exp2 gives 0.
  Value none = arith::CmpFOp::create(ib, arith::CmpFPredicate::OEQ, mx, ninf);
  Value mUse = arith::SelectOp::create(ib, none, kb.fconst(a.ft, 0.0), mx);
  Value corr = math::Exp2Op::create(ib, arith::SubFOp::create(ib, mOld, mUse));
  kb.forLoop(kb.idx(0), kb.idx(t.dv), 1, [&](KernelBuilder &in, Value c) {
    in.store(arith::MulFOp::create(in.builder(), in.load(st.acc, {tid, c}), corr), st.acc,
             {tid, c});
  });
  Value lOld = arith::MulFOp::create(ib, kb.load(st.l, {tid}), corr);
  Value lNew = kb.forLoop(kb.idx(0), kb.idx(t.keys), kb.idx(1), {lOld},
                          [&](KernelBuilder &in, Value j, ValueRange sum) {
    ImplicitLocOpBuilder &b2 = in.builder();
    Value p = math::Exp2Op::create(b2, arith::SubFOp::create(b2, in.load(scores, {j}), mUse));
    in.forLoop(in.idx(0), in.idx(t.dv), 1, [&](KernelBuilder &in2, Value c) {
      ImplicitLocOpBuilder &b3 = in2.builder();
      Value pv = arith::MulFOp::create(b3, p, in2.load(vs, {j, c}));
      in2.store(arith::AddFOp::create(b3, in2.load(st.acc, {tid, c}), pv), st.acc, {tid, c});
    });
    return SmallVector<Value>{arith::AddFOp::create(b2, sum[0], p)};
  })[0];
  kb.store(mx, st.m, {tid});
  kb.store(lNew, st.l, {tid});
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

/// One block: a tile of t.rows queries of head h in sequence b.
void emitBlock(KernelBuilder &kb, const AttentionInfo &a, const GpuTiles &t, Value qt, Value h,
               Value b) {
  RowState st{blockBuffer(kb, a.ft, {t.rows}), blockBuffer(kb, a.ft, {t.rows}),
              blockBuffer(kb, a.ft, {t.rows, t.dv})};
  Value ks = blockBuffer(kb, a.ft, {t.keys, t.dh}), vs = blockBuffer(kb, a.ft, {t.keys, t.dv});
  Value q0 = kb.mul(qt, t.rows), hk = kb.divu(h, a.group);
  SmallVector<KeySegment> segs = keySegments(kb, a, b);
  threads(kb, t, [&](KernelBuilder &in, Value tid) {
    in.store(in.fconst(a.ft, -std::numeric_limits<double>::infinity()), st.m, {tid});
    in.store(in.fconst(a.ft, 0.0), st.l, {tid});
    in.forLoop(in.idx(0), in.idx(t.dv), 1, [&](KernelBuilder &in2, Value c) {
      in2.store(in2.fconst(a.ft, 0.0), st.acc, {tid, c});
    });
  });
  Value rows = kb.min(kb.idx(t.rows), kb.sub(a.nL, q0));
  kb.forLoop(kb.idx(0), kb.ceilDiv(a.nS, t.keys), 1, [&](KernelBuilder &in, Value kt) {
    Value kv0 = in.mul(kt, t.keys);
    auto work = [&](KernelBuilder &x, std::optional<Value> full) {
      stageKeys(x, a, t, segs, b, hk, kv0, ks, vs);
      threads(x, t, [&](KernelBuilder &in2, Value tid) {
        Value qi = in2.add(q0, tid);
        in2.ifThen(in2.cmp(arith::CmpIPredicate::ult, qi, a.nL), [&](KernelBuilder &in3) {
          scoreTile(in3, a, t, st, b, h, tid, qi, kv0, ks, vs, full);
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

struct GpuTilesLowering : OpRewritePattern<AttentionOp> {
  GpuTilesLowering(MLIRContext *ctx, int64_t rows, int64_t keys)
      : OpRewritePattern(ctx), rows(rows), keys(keys) {}

  LogicalResult matchAndRewrite(AttentionOp op, PatternRewriter &rw) const override {
    auto qt = cast<RankedTensorType>(op.getQ().getType());
    auto vt = cast<RankedTensorType>(op.getV().getType());
    int64_t dh = qt.getShape().back(), dv = vt.getShape().back();
    if (ShapedType::isDynamic(dh) || ShapedType::isDynamic(dv))
      return op.emitError("the CUDA attention kernel needs static head dims (the block's "
                          "buffers have static sizes); q's is ")
             << (ShapedType::isDynamic(dh) ? std::string("dynamic") : std::to_string(dh))
             << ", v's " << (ShapedType::isDynamic(dv) ? std::string("dynamic") : std::to_string(dv));
    ImplicitLocOpBuilder ib(op.getLoc(), rw);
    KernelBuilder kb(ib);
    AttentionInfo a = describe(kb, op);
    GpuTiles t{rows, keys, dh, dv};
    // A block's buffers (shared memory) stay within the 48 KiB a kernel may declare
    // statically: fewer rows per block, then fewer keys per tile.
    int64_t bytes = cast<RankedTensorType>(op.getQ().getType()).getElementTypeBitWidth() / 8;
    auto shared = [&] { return bytes * (2 * t.rows + t.rows * dv + t.keys * (dh + dv)); };
    while (shared() > 48 * 1024 && t.rows > 16)
      t.rows /= 2;
    while (shared() > 48 * 1024 && t.keys > 1)
      t.keys /= 2;
    if (shared() > 48 * 1024)
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
};

struct LowerAttentionToGpuTilesPass
    : qkv::ir::impl::LowerAttentionToGpuTilesBase<LowerAttentionToGpuTilesPass> {
  using LowerAttentionToGpuTilesBase::LowerAttentionToGpuTilesBase;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<GpuTilesLowering>(&getContext(), qTile, kvTile);
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
