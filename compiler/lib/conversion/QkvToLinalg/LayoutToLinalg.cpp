// The qkv ops that move elements as linalg and tensor ops: transpose, split_heads,
// merge_heads, concat, embedding, and KV cache views materialised (when something other
// than attention reads them).
#include "QkvToLinalg.h"

#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace qkv::ir;

namespace {

Value transposeAxes(OpBuilder &b, Location loc, Value x, int64_t axA, int64_t axB) {
  int64_t r = tensorType(x).getRank();
  SmallVector<int64_t> perm;
  for (int64_t i = 0; i < r; ++i)
    perm.push_back(i == axA ? axB : i == axB ? axA : i);
  SmallVector<OpFoldResult> sizes;
  for (int64_t i = 0; i < r; ++i)
    sizes.push_back(sizeOf(b, loc, x, perm[i]));
  Value init = emptyOf(b, loc, sizes, tensorType(x).getElementType());
  return linalg::TransposeOp::create(b, loc, x, init, perm).getResult()[0];
}

struct TransposeLowering : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TransposeOp op, PatternRewriter &rw) const override {
    int64_t r = tensorType(op.getX()).getRank();
    rw.replaceOp(op, transposeAxes(rw, op.getLoc(), op.getX(), normalizeAxis(op.getAxisA(), r),
                                   normalizeAxis(op.getAxisB(), r)));
    return success();
  }
};

struct SplitHeadsLowering : OpRewritePattern<SplitHeadsOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SplitHeadsOp op, PatternRewriter &rw) const override {
    Location loc = op.getLoc();
    Value x = op.getX();
    auto xt = tensorType(x);
    int64_t r = xt.getRank();
    auto outT = tensorType(op.getResult());
    int64_t heads = op.getHeads(), dh = outT.getDimSize(r);
    // (..., L, H*Dh) -> (..., L, H, Dh) -> (..., H, L, Dh)
    SmallVector<ReassociationIndices> re;
    for (int64_t i = 0; i < r - 1; ++i)
      re.push_back({i});
    re.push_back({r - 1, r});
    SmallVector<OpFoldResult> shape;
    SmallVector<int64_t> staticShape;
    for (int64_t i = 0; i < r - 1; ++i) {
      shape.push_back(sizeOf(rw, loc, x, i));
      staticShape.push_back(xt.getDimSize(i));
    }
    shape.push_back(rw.getIndexAttr(heads));
    shape.push_back(rw.getIndexAttr(dh));
    staticShape.append({heads, dh});
    auto expT = RankedTensorType::get(staticShape, xt.getElementType());
    Value e = tensor::ExpandShapeOp::create(rw, loc, expT, x, re, shape);
    rw.replaceOp(op, transposeAxes(rw, loc, e, r - 2, r - 1));
    return success();
  }
};

struct MergeHeadsLowering : OpRewritePattern<MergeHeadsOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MergeHeadsOp op, PatternRewriter &rw) const override {
    Location loc = op.getLoc();
    Value x = op.getX();
    int64_t r = tensorType(x).getRank();
    // (..., H, L, Dh) -> (..., L, H, Dh) -> (..., L, H*Dh)
    Value t = transposeAxes(rw, loc, x, r - 3, r - 2);
    SmallVector<ReassociationIndices> re;
    for (int64_t i = 0; i < r - 2; ++i)
      re.push_back({i});
    re.push_back({r - 2, r - 1});
    Value c = tensor::CollapseShapeOp::create(rw, loc, t, re);
    if (c.getType() != op.getType())
      c = tensor::CastOp::create(rw, loc, op.getType(), c);
    rw.replaceOp(op, c);
    return success();
  }
};

struct ConcatLowering : OpRewritePattern<ConcatOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ConcatOp op, PatternRewriter &rw) const override {
    Location loc = op.getLoc();
    Value first = op.getInputs().front();
    int64_t r = tensorType(first).getRank();
    int64_t ax = normalizeAxis(op.getAxis(), r);
    // Output size along the axis: the sum of the inputs'.
    Value total = indexConst(rw, loc, 0);
    for (Value in : op.getInputs())
      total = arith::AddIOp::create(rw, loc, total, sizeValue(rw, loc, in, ax));
    SmallVector<OpFoldResult> sizes = sizesOf(rw, loc, first);
    auto outT = tensorType(op.getResult());
    sizes[ax] = outT.isDynamicDim(ax) ? OpFoldResult(total) : rw.getIndexAttr(outT.getDimSize(ax));
    Value acc = emptyOf(rw, loc, sizes, outT.getElementType());
    Value off = indexConst(rw, loc, 0);
    for (Value in : op.getInputs()) {
      SmallVector<OpFoldResult> offs(r, rw.getIndexAttr(0)), strides(r, rw.getIndexAttr(1));
      offs[ax] = off;
      acc = tensor::InsertSliceOp::create(rw, loc, in, acc, offs, sizesOf(rw, loc, in), strides);
      off = arith::AddIOp::create(rw, loc, off, sizeValue(rw, loc, in, ax));
    }
    rw.replaceOp(op, acc);
    return success();
  }
};

struct EmbeddingLowering : OpRewritePattern<EmbeddingOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(EmbeddingOp op, PatternRewriter &rw) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rw.getContext();
    Value ids = op.getIds(), table = op.getTable();
    unsigned ri = tensorType(ids).getRank(), r = ri + 1;
    SmallVector<OpFoldResult> sizes = sizesOf(rw, loc, ids);
    sizes.push_back(sizeOf(rw, loc, table, 1));
    Type elem = tensorType(op.getResult()).getElementType();
    Value init = emptyOf(rw, loc, sizes, elem);
    Value res =
        generic(rw, loc, init, {ids}, {dimsMap(ctx, r, range(0, ri))}, dimsMap(ctx, r, range(0, r)),
                iterators(r), [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                  Value row = arith::IndexCastOp::create(b, l, b.getIndexType(), a[0]);
                  Value col = linalg::IndexOp::create(b, l, r - 1);
                  return tensor::ExtractOp::create(b, l, table, ValueRange{row, col});
                });
    rw.replaceOp(op, res);
    return success();
  }
};

/// A cache view materialised (when something other than attention reads it): row j of
/// sequence b is the stored row (`stored(b, h, j, d)`) below lengths[b], then fresh's rows,
/// then zeros. Reads are guarded by scf.if, so no index is ever out of bounds.
Value cacheViewGeneric(OpBuilder &rw, Location loc, Value rows, Value lengths, Value fresh,
                       function_ref<Value(OpBuilder &, Location, ValueRange)> stored) {
  Type elem = tensorType(fresh).getElementType();
  Value n = sizeValue(rw, loc, fresh, 2);
  SmallVector<OpFoldResult> outSizes = sizesOf(rw, loc, fresh);
  outSizes[2] = arith::AddIOp::create(rw, loc, rows, n).getResult();
  Value init = emptyOf(rw, loc, outSizes, elem);
  MLIRContext *ctx = rw.getContext();
  return generic(
      rw, loc, init, {}, {}, dimsMap(ctx, 4, range(0, 4)), iterators(4),
      [&](OpBuilder &b, Location l, ValueRange) -> Value {
        SmallVector<Value> idx;
        for (unsigned j = 0; j < 4; ++j)
          idx.push_back(linalg::IndexOp::create(b, l, j));
        Value len = arith::IndexCastOp::create(
            b, l, b.getIndexType(), tensor::ExtractOp::create(b, l, lengths, ValueRange{idx[0]}));
        Value inStore = arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt, idx[2], len);
        Value row = arith::SubIOp::create(b, l, idx[2], len);
        Value inFresh = arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt, row, n);
        auto outer = scf::IfOp::create(b, l, TypeRange{elem}, inStore, true);
        {
          OpBuilder::InsertionGuard g(b);
          b.setInsertionPointToStart(&outer.getThenRegion().front());
          scf::YieldOp::create(b, l, stored(b, l, idx));
          b.setInsertionPointToStart(&outer.getElseRegion().front());
          auto inner = scf::IfOp::create(b, l, TypeRange{elem}, inFresh, true);
          b.setInsertionPointToStart(&inner.getThenRegion().front());
          Value v = tensor::ExtractOp::create(b, l, fresh, ValueRange{idx[0], idx[1], row, idx[3]});
          scf::YieldOp::create(b, l, v);
          b.setInsertionPointToStart(&inner.getElseRegion().front());
          scf::YieldOp::create(b, l, floatConst(b, l, elem, 0.0));
          b.setInsertionPointAfter(inner);
          scf::YieldOp::create(b, l, inner.getResult(0));
        }
        return outer.getResult(0);
      });
}

struct CacheViewLowering : OpRewritePattern<CacheViewOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(CacheViewOp op, PatternRewriter &rw) const override {
    Value past = op.getPast();
    Value rows = sizeValue(rw, op.getLoc(), past, 2);
    Value res = cacheViewGeneric(rw, op.getLoc(), rows, op.getLengths(), op.getFresh(),
                                 [&](OpBuilder &b, Location l, ValueRange i) {
                                   return tensor::ExtractOp::create(b, l, past, i).getResult();
                                 });
    if (res.getType() != op.getType())
      res = tensor::CastOp::create(rw, op.getLoc(), op.getType(), res);
    rw.replaceOp(op, res);
    return success();
  }
};

struct PagedCacheViewLowering : OpRewritePattern<PagedCacheViewOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(PagedCacheViewOp op, PatternRewriter &rw) const override {
    Location loc = op.getLoc();
    Value pool = op.getPool(), table = op.getTable();
    Value page = sizeValue(rw, loc, pool, 2);
    auto stored = [&](OpBuilder &b, Location l, ValueRange i) -> Value {
      Value slot = arith::DivUIOp::create(b, l, i[2], page);
      Value id = tensor::ExtractOp::create(b, l, table, ValueRange{i[0], slot});
      Value pg = arith::IndexCastOp::create(b, l, b.getIndexType(), id);
      Value row = arith::RemUIOp::create(b, l, i[2], page);
      return tensor::ExtractOp::create(b, l, pool, ValueRange{pg, i[1], row, i[3]});
    };
    Value rows = arith::MulIOp::create(rw, loc, sizeValue(rw, loc, table, 1), page);
    Value res = cacheViewGeneric(rw, loc, rows, op.getLengths(), op.getFresh(), stored);
    if (res.getType() != op.getType())
      res = tensor::CastOp::create(rw, loc, op.getType(), res);
    rw.replaceOp(op, res);
    return success();
  }
};

} // namespace

void qkv::ir::populateQkvLayoutToLinalgPatterns(RewritePatternSet &patterns) {
  patterns.add<TransposeLowering, SplitHeadsLowering, MergeHeadsLowering, ConcatLowering,
               EmbeddingLowering, CacheViewLowering, PagedCacheViewLowering>(patterns.getContext());
}
