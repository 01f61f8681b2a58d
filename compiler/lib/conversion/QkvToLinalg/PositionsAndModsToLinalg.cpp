// qkv.mask and qkv.score_mod over materialised scores, and the position encodings
// (sinusoidal_pe, rope), as linalg.generic: positions come from linalg.index, dynamic
// sizes from tensor.dim, angles in f64.
#include "QkvToLinalg.h"

#include <cmath>

#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using namespace qkv::ir;

namespace {

/// b, h, q, kv (from linalg.index inside a generic over scores of rank r) and len_q,
/// len_kv (computed outside).
SmallVector<Value> modPositions(OpBuilder &b, Location l, unsigned r, Value lenQ, Value lenKV) {
  Value zero = indexConst(b, l, 0);
  Value bi = r == 4 ? Value(linalg::IndexOp::create(b, l, 0)) : zero;
  Value hi = r >= 3 ? Value(linalg::IndexOp::create(b, l, r - 3)) : zero;
  Value qi = linalg::IndexOp::create(b, l, r - 2);
  Value ki = linalg::IndexOp::create(b, l, r - 1);
  return {bi, hi, qi, ki, lenQ, lenKV};
}

struct MaskLowering : OpRewritePattern<MaskOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MaskOp op, PatternRewriter &rw) const override {
    Location loc = op.getLoc();
    Value s = op.getScores();
    unsigned r = tensorType(s).getRank();
    Type elem = tensorType(s).getElementType();
    Value lq = sizeValue(rw, loc, s, r - 2), lk = sizeValue(rw, loc, s, r - 1);
    double ninf = -std::numeric_limits<double>::infinity();
    Value res =
        elementwise(rw, loc, s, elem, {s}, [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          SmallVector<Value> pos = modPositions(b, l, r, lq, lk);
          Value keep = inlineModRegion(b, op.getBody(), pos, op.getCaptures());
          return arith::SelectOp::create(b, l, keep, a[0], floatConst(b, l, elem, ninf));
        });
    rw.replaceOp(op, res);
    return success();
  }
};

struct ScoreModLowering : OpRewritePattern<ScoreModOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ScoreModOp op, PatternRewriter &rw) const override {
    Location loc = op.getLoc();
    Value s = op.getScores();
    unsigned r = tensorType(s).getRank();
    Type elem = tensorType(s).getElementType();
    Value lq = sizeValue(rw, loc, s, r - 2), lk = sizeValue(rw, loc, s, r - 1);
    Value res =
        elementwise(rw, loc, s, elem, {s}, [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          SmallVector<Value> lead{a[0]};
          lead.append(modPositions(b, l, r, lq, lk));
          return inlineModRegion(b, op.getBody(), lead, op.getCaptures());
        });
    rw.replaceOp(op, res);
    return success();
  }
};

/// angle = p * base^(-2i/D), in f64 so long positions keep their precision.
Value angleF64(OpBuilder &b, Location l, Value pos, Value i, Value dimF64, double base) {
  Type f64 = b.getF64Type();
  Value two_i = indexToFloat(b, l, arith::MulIOp::create(b, l, i, indexConst(b, l, 2)), f64);
  Value expo = arith::DivFOp::create(b, l, two_i, dimF64);
  // base^(-expo) = exp(-expo * ln(base))
  Value inv = math::ExpOp::create(b, l,
                                  arith::MulFOp::create(b, l, arith::NegFOp::create(b, l, expo),
                                                        floatConst(b, l, f64, std::log(base))));
  return arith::MulFOp::create(b, l, indexToFloat(b, l, pos, f64), inv);
}

Value toElem(OpBuilder &b, Location l, Value f64, Type elem) {
  if (elem.isF64())
    return f64;
  return arith::TruncFOp::create(b, l, elem, f64);
}

struct SinusoidalPELowering : OpRewritePattern<SinusoidalPEOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SinusoidalPEOp op, PatternRewriter &rw) const override {
    Location loc = op.getLoc();
    Value x = op.getX();
    unsigned r = tensorType(x).getRank();
    Type elem = tensorType(x).getElementType();
    Value dimF = indexToFloat(rw, loc, sizeValue(rw, loc, x, r - 1), rw.getF64Type());
    double base = op.getBase().convertToDouble();
    int64_t offset = op.getOffset();
    Value res =
        elementwise(rw, loc, x, elem, {x}, [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          Value p = arith::AddIOp::create(b, l, linalg::IndexOp::create(b, l, r - 2),
                                          indexConst(b, l, offset));
          Value d = linalg::IndexOp::create(b, l, r - 1);
          Value two = indexConst(b, l, 2);
          Value i = arith::DivUIOp::create(b, l, d, two);
          Value ang = angleF64(b, l, p, i, dimF, base);
          Value even =
              arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq,
                                    arith::RemUIOp::create(b, l, d, two), indexConst(b, l, 0));
          Value pe = arith::SelectOp::create(b, l, even, math::SinOp::create(b, l, ang),
                                             math::CosOp::create(b, l, ang));
          return arith::AddFOp::create(b, l, a[0], toElem(b, l, pe, elem));
        });
    rw.replaceOp(op, res);
    return success();
  }
};

/// RoPE's cos and sin of angle(position, i) for every row position and pair i, rounded to
/// `elem` as the rotation uses them: (B, L, Dh/2) each with per-sequence positions, else
/// (L, Dh/2). Computed once per layer and position, not per head (the tables of q and k,
/// over the same positions, are one op after CSE); the frequencies base^(-2i/Dh) once per
/// pair, and cos and sin of one angle side by side (one sincos call).
std::pair<Value, Value> ropeTables(OpBuilder &rw, Location loc, RopeOp op, Type elem) {
  Value x = op.getX();
  auto xt = tensorType(x);
  unsigned r = xt.getRank();
  int64_t dh = xt.getDimSize(r - 1);
  Value pos = op.getPositions();
  bool perSeq = pos && tensorType(pos).getRank() == 2;
  Type f64 = rw.getF64Type();
  Value dimF = floatConst(rw, loc, f64, static_cast<double>(dh));
  double base = op.getBase().convertToDouble();
  MLIRContext *ctx = rw.getContext();
  // inv[i] = base^(-2i/Dh), in f64
  Value inv = generic(rw, loc, emptyOf(rw, loc, {rw.getIndexAttr(dh / 2)}, f64), {}, {},
                      dimsMap(ctx, 1, {0}), iterators(1),
                      [&](OpBuilder &b, Location l, ValueRange) -> Value {
                        return angleF64(b, l, indexConst(b, l, 1), linalg::IndexOp::create(b, l, 0),
                                        dimF, base);
                      });
  SmallVector<OpFoldResult> sizes;
  if (perSeq)
    sizes.push_back(tensor::getMixedSize(rw, loc, pos, 0));
  // A dynamic count of rows from the positions where there are some (the verifier has
  // them agree with x's): q's and k's tables then have the same operands and CSE makes
  // them one (x's dims are two values, one per projection, equal only at run time).
  OpFoldResult rows = tensor::getMixedSize(rw, loc, x, r - 2);
  if (pos && !isa<Attribute>(rows))
    rows = tensor::getMixedSize(rw, loc, pos, perSeq ? 1 : 0);
  sizes.push_back(rows);
  sizes.push_back(rw.getIndexAttr(dh / 2));
  unsigned tr = sizes.size();
  Value init = emptyOf(rw, loc, sizes, elem);
  SmallVector<AffineMap> maps = {dimsMap(ctx, tr, {tr - 1}), dimsMap(ctx, tr, range(0, tr)),
                                 dimsMap(ctx, tr, range(0, tr))};
  int64_t offset = op.getOffset();
  auto table = linalg::GenericOp::create(
      rw, loc, TypeRange{init.getType(), init.getType()}, ValueRange{inv}, ValueRange{init, init},
      maps, iterators(tr), [&](OpBuilder &b, Location l, ValueRange a) {
        Value row = linalg::IndexOp::create(b, l, tr - 2);
        Value p = arith::AddIOp::create(b, l, row, indexConst(b, l, offset));
        if (pos) {
          SmallVector<Value> at;
          if (perSeq)
            at.push_back(linalg::IndexOp::create(b, l, 0));
          at.push_back(row);
          p = arith::IndexCastOp::create(b, l, b.getIndexType(),
                                         tensor::ExtractOp::create(b, l, pos, at));
        }
        Value ang = arith::MulFOp::create(b, l, indexToFloat(b, l, p, b.getF64Type()), a[0]);
        linalg::YieldOp::create(b, l,
                                ValueRange{toElem(b, l, math::CosOp::create(b, l, ang), elem),
                                           toElem(b, l, math::SinOp::create(b, l, ang), elem)});
      });
  return {table.getResult(0), table.getResult(1)};
}

/// Rotation by pairs (i, i + Dh/2): each half of the output is one elementwise op over
/// the two halves of x and the tables (out1 = x1 cos - x2 sin, out2 = x2 cos + x1 sin),
/// written into its half of the result: plain maps, no gathers, so the loops stage
/// vectorizes them.
Value ropeHalves(PatternRewriter &rw, Location loc, Value x, Value cosT, Value sinT) {
  auto xt = tensorType(x);
  unsigned r = xt.getRank();
  int64_t half = xt.getDimSize(r - 1) / 2;
  SmallVector<OpFoldResult> sizes = sizesOf(rw, loc, x);
  Value out = emptyOf(rw, loc, sizes, xt.getElementType());
  SmallVector<OpFoldResult> halfSizes = sizes, strides(r, rw.getIndexAttr(1));
  halfSizes[r - 1] = rw.getIndexAttr(half);
  auto at = [&](int64_t from) {
    SmallVector<OpFoldResult> offs(r, rw.getIndexAttr(0));
    offs[r - 1] = rw.getIndexAttr(from);
    return offs;
  };
  Value x1 = tensor::ExtractSliceOp::create(rw, loc, x, at(0), halfSizes, strides);
  Value x2 = tensor::ExtractSliceOp::create(rw, loc, x, at(half), halfSizes, strides);
  MLIRContext *ctx = rw.getContext();
  unsigned tr = tensorType(cosT).getRank();
  // The tables: (L, half) or (B, L, half), the dims (b,) l, i of the (b, h, l, i) loops.
  SmallVector<unsigned> tdims = tr == 3 ? SmallVector<unsigned>{0, r - 2, r - 1}
                                        : SmallVector<unsigned>{r - 2, r - 1};
  SmallVector<AffineMap> maps = {dimsMap(ctx, r, range(0, r)), dimsMap(ctx, r, range(0, r)),
                                 dimsMap(ctx, r, tdims), dimsMap(ctx, r, tdims)};
  for (int64_t part = 0; part < 2; ++part) {
    Value dst = tensor::ExtractSliceOp::create(rw, loc, out, at(part * half), halfSizes, strides);
    Value v = generic(rw, loc, dst, {x1, x2, cosT, sinT}, maps, dimsMap(ctx, r, range(0, r)),
                      iterators(r), [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                        Value own = part ? a[1] : a[0], other = part ? a[0] : a[1];
                        Value xc = arith::MulFOp::create(b, l, own, a[2]);
                        Value os = arith::MulFOp::create(b, l, other, a[3]);
                        return part ? Value(arith::AddFOp::create(b, l, xc, os))
                                    : Value(arith::SubFOp::create(b, l, xc, os));
                      });
    out = tensor::InsertSliceOp::create(rw, loc, v, out, at(part * half), halfSizes, strides);
  }
  return out;
}

struct RopeLowering : OpRewritePattern<RopeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(RopeOp op, PatternRewriter &rw) const override {
    Location loc = op.getLoc();
    Value x = op.getX();
    auto xt = tensorType(x);
    unsigned r = xt.getRank();
    Type elem = xt.getElementType();
    int64_t half = xt.getDimSize(r - 1) / 2;
    bool inter = op.getInterleaved();
    bool perSeq = op.getPositions() && tensorType(op.getPositions()).getRank() == 2;
    auto [cosT, sinT] = ropeTables(rw, loc, op, elem);
    if (!inter) {
      rw.replaceOp(op, ropeHalves(rw, loc, x, cosT, sinT));
      return success();
    }
    Value res =
        elementwise(rw, loc, x, elem, {x}, [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          SmallVector<Value> idx;
          for (unsigned j = 0; j < r; ++j)
            idx.push_back(linalg::IndexOp::create(b, l, j));
          Value d = idx.back();
          Value i, partner, first;
          if (inter) {
            // pairs (2i, 2i+1): the first of a pair is even
            Value two = indexConst(b, l, 2);
            i = arith::DivUIOp::create(b, l, d, two);
            first =
                arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq,
                                      arith::RemUIOp::create(b, l, d, two), indexConst(b, l, 0));
            partner = arith::SelectOp::create(b, l, first,
                                              arith::AddIOp::create(b, l, d, indexConst(b, l, 1)),
                                              arith::SubIOp::create(b, l, d, indexConst(b, l, 1)));
          } else {
            // pairs (i, i + Dh/2)
            Value h = indexConst(b, l, half);
            first = arith::CmpIOp::create(b, l, arith::CmpIPredicate::ult, d, h);
            i = arith::SelectOp::create(b, l, first, d, arith::SubIOp::create(b, l, d, h));
            partner = arith::SelectOp::create(b, l, first, arith::AddIOp::create(b, l, d, h),
                                              arith::SubIOp::create(b, l, d, h));
          }
          SmallVector<Value> at;
          if (perSeq)
            at.push_back(idx[0]);
          at.append({idx[r - 2], i});
          Value c = tensor::ExtractOp::create(b, l, cosT, at);
          Value s = tensor::ExtractOp::create(b, l, sinT, at);
          idx.back() = partner;
          Value other = tensor::ExtractOp::create(b, l, x, idx);
          // first: a cos - b sin; second: b cos + a sin (a = the first of the pair)
          Value xc = arith::MulFOp::create(b, l, a[0], c);
          Value os = arith::MulFOp::create(b, l, other, s);
          return arith::SelectOp::create(b, l, first, arith::SubFOp::create(b, l, xc, os),
                                         arith::AddFOp::create(b, l, xc, os));
        });
    rw.replaceOp(op, res);
    return success();
  }
};

} // namespace

void qkv::ir::populateQkvPositionsAndModsToLinalgPatterns(RewritePatternSet &patterns) {
  patterns.add<MaskLowering, ScoreModLowering, SinusoidalPELowering, RopeLowering>(patterns.getContext());
}
