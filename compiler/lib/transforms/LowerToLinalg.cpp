// qkv-lower-to-linalg: every qkv op except attention becomes linalg.generic / named linalg
// ops / tensor reshapes on tensors, computing exactly what the interpreter computes.
// Positions (for masks, PE, RoPE) come from linalg.index; dynamic sizes from tensor.dim.
#include "LoweringUtils.h"

#include <cmath>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include "qkv/compiler/transforms/Passes.h"

namespace qkv::ir {
#define GEN_PASS_DEF_LOWERTOLINALG
#define GEN_PASS_DEF_COPYREPEATEDRESULTS
#include "qkv/compiler/transforms/Passes.h.inc"
} // namespace qkv::ir

using namespace mlir;
using namespace qkv::ir;

namespace {

using BodyFn = function_ref<Value(OpBuilder &, Location, ValueRange)>;

AffineMap dimsMap(MLIRContext *ctx, unsigned numLoops, ArrayRef<unsigned> dims) {
  SmallVector<AffineExpr> exprs;
  for (unsigned d : dims)
    exprs.push_back(getAffineDimExpr(d, ctx));
  return AffineMap::get(numLoops, 0, exprs, ctx);
}

/// The loops [from, to) as a list.
SmallVector<unsigned> range(unsigned from, unsigned to) {
  SmallVector<unsigned> r;
  for (unsigned i = from; i < to; ++i)
    r.push_back(i);
  return r;
}

SmallVector<utils::IteratorType> iterators(unsigned parallel, unsigned reduction = 0,
                                           int reductionAt = -1) {
  SmallVector<utils::IteratorType> it(parallel + reduction, utils::IteratorType::parallel);
  if (reduction) {
    unsigned at = reductionAt < 0 ? parallel : static_cast<unsigned>(reductionAt);
    for (unsigned i = 0; i < reduction; ++i)
      it[at + i] = utils::IteratorType::reduction;
  }
  return it;
}

Value emptyOf(OpBuilder &b, Location loc, ArrayRef<OpFoldResult> sizes, Type elem) {
  return tensor::EmptyOp::create(b, loc, sizes, elem);
}

Value filled(OpBuilder &b, Location loc, ArrayRef<OpFoldResult> sizes, Type elem, double v) {
  Value init = emptyOf(b, loc, sizes, elem);
  return linalg::FillOp::create(b, loc, ValueRange{floatConst(b, loc, elem, v)}, ValueRange{init})
      .getResult(0);
}

Value generic(OpBuilder &b, Location loc, Value init, ValueRange inputs, ArrayRef<AffineMap> inMaps,
              AffineMap outMap, ArrayRef<utils::IteratorType> iters, BodyFn body) {
  SmallVector<AffineMap> maps(inMaps.begin(), inMaps.end());
  maps.push_back(outMap);
  auto op =
      linalg::GenericOp::create(b, loc, TypeRange{init.getType()}, inputs, ValueRange{init}, maps,
                                iters, [&](OpBuilder &nb, Location nl, ValueRange args) {
                                  linalg::YieldOp::create(nb, nl, body(nb, nl, args));
                                });
  return op.getResult(0);
}

SmallVector<OpFoldResult> sizesOf(OpBuilder &b, Location loc, Value t) {
  return tensor::getMixedSizes(b, loc, t);
}

/// An elementwise op over `out`'s shape (taken from `shapeFrom`); each input is the full
/// shape or broadcast along leading dims (its dims end the output's).
Value elementwise(OpBuilder &b, Location loc, Value shapeFrom, Type elem, ValueRange inputs,
                  BodyFn body) {
  unsigned r = tensorType(shapeFrom).getRank();
  SmallVector<AffineMap> maps;
  for (Value in : inputs) {
    unsigned ri = tensorType(in).getRank();
    maps.push_back(dimsMap(b.getContext(), r, range(r - ri, r)));
  }
  Value init = emptyOf(b, loc, sizesOf(b, loc, shapeFrom), elem);
  return generic(b, loc, init, inputs, maps, dimsMap(b.getContext(), r, range(0, r)), iterators(r),
                 body);
}

Value sigmoidTimes(OpBuilder &b, Location loc, Value x, Value y) {
  // x * sigmoid(x) * ... : silu(x) = x / (1 + exp(-x)).
  Type t = x.getType();
  Value one = floatConst(b, loc, t, 1.0);
  Value e = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, x));
  Value s = arith::DivFOp::create(b, loc, x, arith::AddFOp::create(b, loc, one, e));
  return y ? Value(arith::MulFOp::create(b, loc, s, y)) : s;
}

// ---- ops -----------------------------------------------------------------------------------

/// x with its leading dims [0, n) merged into one: (d0, ..., dn-1, rest...) ->
/// (d0 * ... * dn-1, rest...).
Value collapseLeading(OpBuilder &b, Location loc, Value x, unsigned n) {
  unsigned r = tensorType(x).getRank();
  SmallVector<ReassociationIndices> re;
  ReassociationIndices first;
  for (unsigned i = 0; i < n; ++i)
    first.push_back(i);
  re.push_back(first);
  for (unsigned i = n; i < r; ++i)
    re.push_back({static_cast<int64_t>(i)});
  return tensor::CollapseShapeOp::create(b, loc, x, re);
}

/// The inverse of collapseLeading for a result whose leading dims are `lead`.
Value expandLeading(OpBuilder &b, Location loc, Value y, ArrayRef<OpFoldResult> lead,
                    RankedTensorType resultType) {
  unsigned n = lead.size(), r = tensorType(y).getRank();
  SmallVector<ReassociationIndices> re;
  ReassociationIndices first;
  for (unsigned i = 0; i < n; ++i)
    first.push_back(i);
  re.push_back(first);
  for (unsigned i = 1; i < r; ++i)
    re.push_back({static_cast<int64_t>(n + i - 1)});
  SmallVector<OpFoldResult> shape(lead.begin(), lead.end());
  for (unsigned i = 1; i < r; ++i)
    shape.push_back(sizeOf(b, loc, y, i));
  return tensor::ExpandShapeOp::create(b, loc, resultType, y, re, shape);
}

/// Whether merging the leading n dims of t leaves a reshape MLIR can lower: at most one
/// of them dynamic (memref.expand_shape with two dynamic sizes in one group crashes
/// expand-strided-metadata in MLIR 22).
bool mergeable(Value t, unsigned n) {
  auto tt = tensorType(t);
  unsigned dynamic = 0;
  for (unsigned i = 0; i < n; ++i)
    dynamic += tt.isDynamicDim(i);
  return dynamic <= 1;
}

/// C = init + A . B as a named op that qkv-lower-matmul-to-microkernels turns into
/// register-tiled vector code: linalg.matmul for 2-D A, linalg.batch_matmul for 3-D A,
/// with B shared by every batch (a broadcast indexing map) when B is 2-D.
Value namedMatmul(OpBuilder &b, Location loc, Value a, Value bb, Value init) {
  if (tensorType(a).getRank() == 2)
    return linalg::MatmulOp::create(b, loc, ValueRange{a, bb}, ValueRange{init}).getResult(0);
  SmallVector<NamedAttribute> attrs;
  if (tensorType(bb).getRank() == 2) {
    MLIRContext *ctx = b.getContext();
    AffineMap maps[] = {dimsMap(ctx, 4, {0, 1, 3}), dimsMap(ctx, 4, {3, 2}),
                        dimsMap(ctx, 4, {0, 1, 2})};
    SmallVector<Attribute> mapAttrs;
    for (AffineMap m : maps)
      mapAttrs.push_back(AffineMapAttr::get(m));
    attrs.push_back(b.getNamedAttr("indexing_maps", b.getArrayAttr(mapAttrs)));
  }
  return linalg::BatchMatmulOp::create(b, loc, ValueRange{a, bb}, ValueRange{init}, attrs)
      .getResult(0);
}

/// A (..., M, K) . B (K, N) or (..., K, N) with the same leading dims: batch dims merged
/// into one for linalg.batch_matmul when more than one; null when they cannot be merged.
Value batchedMatmul(OpBuilder &b, Location loc, Value a, Value bb, Value init,
                    RankedTensorType resT) {
  unsigned r = tensorType(a).getRank(), nb = r - 2;
  bool sharedB = tensorType(bb).getRank() == 2;
  if (nb == 1)
    return namedMatmul(b, loc, a, bb, init);
  if (!mergeable(a, nb))
    return Value();
  SmallVector<OpFoldResult> lead;
  for (unsigned i = 0; i < nb; ++i)
    lead.push_back(sizeOf(b, loc, a, i));
  // One statement each: as call arguments their order would be the C++ compiler's (g++
  // and clang differ), and so would the IR.
  Value a2 = collapseLeading(b, loc, a, nb);
  Value b2 = sharedB ? bb : collapseLeading(b, loc, bb, nb);
  Value init2 = collapseLeading(b, loc, init, nb);
  Value res = namedMatmul(b, loc, a2, b2, init2);
  return expandLeading(b, loc, res, lead, resT);
}

/// acc + x * y, x and y (f16 or bf16 operands of a product) widened to acc's type first.
Value multiplyAdd(OpBuilder &b, Location loc, Value x, Value y, Value acc) {
  auto widen = [&](Value v) -> Value {
    return v.getType() == acc.getType() ? v : arith::ExtFOp::create(b, loc, acc.getType(), v);
  };
  Value p = arith::MulFOp::create(b, loc, widen(x), widen(y));
  return arith::AddFOp::create(b, loc, acc, p);
}

/// The product as a linalg.generic: for shapes the named ops do not take.
Value genericMatmul(OpBuilder &b, Location loc, Value a, Value bb, Value init) {
  unsigned ra = tensorType(a).getRank(), rb = tensorType(bb).getRank();
  unsigned r = std::max(ra, rb), nb = r - 2;
  unsigned m = nb, n = nb + 1, k = nb + 2, loops = r + 1;
  auto batch = range(0, nb);
  SmallVector<unsigned> am = ra == r ? batch : SmallVector<unsigned>{};
  am.append({m, k});
  SmallVector<unsigned> bm = rb == r ? batch : SmallVector<unsigned>{};
  bm.append({k, n});
  SmallVector<unsigned> om = batch;
  om.append({m, n});
  MLIRContext *ctx = b.getContext();
  return generic(b, loc, init, {a, bb}, {dimsMap(ctx, loops, am), dimsMap(ctx, loops, bm)},
                 dimsMap(ctx, loops, om), iterators(r, 1),
                 [](OpBuilder &nb2, Location l, ValueRange args) -> Value {
                   return multiplyAdd(nb2, l, args[0], args[1], args[2]);
                 });
}

struct MatMulLowering : OpRewritePattern<MatMulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MatMulOp op, PatternRewriter &rw) const override {
    Location loc = op.getLoc();
    Value a = op.getLhs(), bb = op.getRhs();
    unsigned ra = tensorType(a).getRank(), rb = tensorType(bb).getRank();
    auto resT = tensorType(op.getResult());
    Value full = ra >= rb ? a : bb;
    SmallVector<OpFoldResult> sizes;
    for (unsigned i = 0; i + 2 < std::max(ra, rb); ++i)
      sizes.push_back(sizeOf(rw, loc, full, i));
    sizes.push_back(sizeOf(rw, loc, a, ra - 2));
    sizes.push_back(sizeOf(rw, loc, bb, rb - 1));
    Value init = filled(rw, loc, sizes, resT.getElementType(), 0.0);
    Value res;
    if (ra == 2 && rb == 2)
      res = namedMatmul(rw, loc, a, bb, init);
    else if (ra >= 3 && (rb == 2 || rb == ra))
      res = batchedMatmul(rw, loc, a, bb, init, resT);
    if (!res) // a 2-D A broadcast over B's batches, or batch dims that cannot merge
      res = genericMatmul(rw, loc, a, bb, init);
    rw.replaceOp(op, res);
    return success();
  }
};

struct LinearLowering : OpRewritePattern<LinearOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LinearOp op, PatternRewriter &rw) const override {
    Location loc = op.getLoc();
    Value x = op.getX(), w = op.getWeight();
    unsigned rx = tensorType(x).getRank();
    auto resT = tensorType(op.getResult());
    Type elem = resT.getElementType();
    SmallVector<OpFoldResult> sizes;
    for (unsigned i = 0; i + 1 < rx; ++i)
      sizes.push_back(sizeOf(rw, loc, x, i));
    sizes.push_back(sizeOf(rw, loc, w, 1));
    Value init;
    if (Value bias = op.getBias())
      init = elementwise(rw, loc, emptyOf(rw, loc, sizes, elem), elem, {bias},
                         [](OpBuilder &, Location, ValueRange args) { return args[0]; });
    else
      init = filled(rw, loc, sizes, elem, 0.0);
    Value res;
    if (rx == 2)
      res = namedMatmul(rw, loc, x, w, init);
    else if (rx >= 3)
      res = batchedMatmul(rw, loc, x, w, init, resT);
    if (!res) { // x (K) or batch dims that cannot merge
      MLIRContext *ctx = rw.getContext();
      unsigned p = rx - 1, n = p, k = p + 1, loops = rx + 1;
      auto xm = range(0, p);
      xm.push_back(k);
      auto om = range(0, p);
      om.push_back(n);
      res = generic(rw, loc, init, {x, w}, {dimsMap(ctx, loops, xm), dimsMap(ctx, loops, {k, n})},
                    dimsMap(ctx, loops, om), iterators(rx, 1),
                    [](OpBuilder &b, Location l, ValueRange args) -> Value {
                      return multiplyAdd(b, l, args[0], args[1], args[2]);
                    });
    }
    rw.replaceOp(op, res);
    return success();
  }
};

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

template <class OpT> struct BinaryLowering : OpRewritePattern<OpT> {
  using OpRewritePattern<OpT>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpT op, PatternRewriter &rw) const override {
    Location loc = op.getLoc();
    Value a = op.getLhs(), b = op.getRhs();
    Value longer = tensorType(a).getRank() >= tensorType(b).getRank() ? a : b;
    Type elem = tensorType(op.getResult()).getElementType();
    Value res = elementwise(rw, loc, longer, elem, {a, b},
                            [](OpBuilder &bb, Location l, ValueRange args) -> Value {
                              if constexpr (std::is_same_v<OpT, AddOp>)
                                return arith::AddFOp::create(bb, l, args[0], args[1]);
                              else if constexpr (std::is_same_v<OpT, SubOp>)
                                return arith::SubFOp::create(bb, l, args[0], args[1]);
                              else if constexpr (std::is_same_v<OpT, MulOp>)
                                return arith::MulFOp::create(bb, l, args[0], args[1]);
                              else if constexpr (std::is_same_v<OpT, DivOp>)
                                return arith::DivFOp::create(bb, l, args[0], args[1]);
                              else
                                return sigmoidTimes(bb, l, args[0], args[1]); // swiglu
                            });
    rw.replaceOp(op, res);
    return success();
  }
};

Value eluValue(OpBuilder &b, Location l, Value x, double alpha) {
  Type t = x.getType();
  Value zero = floatConst(b, l, t, 0.0);
  Value pos = arith::CmpFOp::create(b, l, arith::CmpFPredicate::OGT, x, zero);
  Value em1 = arith::SubFOp::create(b, l, math::ExpOp::create(b, l, x), floatConst(b, l, t, 1.0));
  Value neg = arith::MulFOp::create(b, l, floatConst(b, l, t, alpha), em1);
  return arith::SelectOp::create(b, l, pos, x, neg);
}

// Elementwise bodies of the unary ops: f(op, builder, loc, element type, x).
Value scaleBody(ScaleOp op, OpBuilder &b, Location l, Type t, Value x) {
  return arith::MulFOp::create(b, l, x, floatConst(b, l, t, op.getFactor().convertToDouble()));
}

/// erf for f32 without a libm call: x P(x^2) / Q(x^2) on x clamped to [-4, 4] (Eigen's
/// fast erf; |error| < 7e-8 in exact arithmetic, a few ulp in f32).
Value erfF32(OpBuilder &b, Location l, Type t, Value x) {
  static const double p[] = {-2.72614225801306e-10, 2.77068142495902e-08,  -2.10102402082508e-06,
                             -5.69250639462346e-05, -7.34990630326855e-04, -2.95459980854025e-03,
                             -1.60960333262415e-02};
  static const double q[] = {-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
                             -7.37332916720468e-03, -1.42647390514189e-02};
  Value c = arith::MaximumFOp::create(b, l, floatConst(b, l, t, -4.0),
                                      arith::MinimumFOp::create(b, l, floatConst(b, l, t, 4.0), x));
  Value x2 = arith::MulFOp::create(b, l, c, c);
  auto horner = [&](const double *k, int n) {
    Value acc = floatConst(b, l, t, k[0]);
    for (int i = 1; i < n; ++i)
      acc = math::FmaOp::create(b, l, acc, x2, floatConst(b, l, t, k[i]));
    return acc;
  };
  Value num = arith::MulFOp::create(b, l, c, horner(p, 7));
  return arith::DivFOp::create(b, l, num, horner(q, 5));
}

Value geluBody(GeluOp op, OpBuilder &b, Location l, Type t, Value x) {
  Value inner;
  if (op.getApproximate()) { // tanh(sqrt(2/pi) (x + 0.044715 x^3))
    Value x3 = arith::MulFOp::create(b, l, x, arith::MulFOp::create(b, l, x, x));
    Value u = arith::AddFOp::create(b, l, x,
                                    arith::MulFOp::create(b, l, floatConst(b, l, t, 0.044715), x3));
    inner = math::TanhOp::create(
        b, l, arith::MulFOp::create(b, l, floatConst(b, l, t, std::sqrt(2.0 / M_PI)), u));
  } else if (t.isF32()) { // erf(x / sqrt(2)), inline
    inner = erfF32(b, l, t, arith::MulFOp::create(b, l, x, floatConst(b, l, t, M_SQRT1_2)));
  } else { // erf(x / sqrt(2))
    inner =
        math::ErfOp::create(b, l, arith::MulFOp::create(b, l, x, floatConst(b, l, t, M_SQRT1_2)));
  }
  Value s = arith::AddFOp::create(b, l, floatConst(b, l, t, 1.0), inner);
  return arith::MulFOp::create(b, l, floatConst(b, l, t, 0.5), arith::MulFOp::create(b, l, x, s));
}

Value siluBody(SiluOp, OpBuilder &b, Location l, Type, Value x) {
  return sigmoidTimes(b, l, x, Value());
}

/// log(1 + e^x) = max(x, 0) + log1p(e) with e = e^-|x| in (0, 1]: no overflow. log1p(e)
/// as log(u) * e / (u - 1), u = 1 + e (e itself when u rounds to 1), which keeps e's
/// digits where log(1 + e) would round them away (math.log1p becomes log(1 + e) in LLVM).
Value softplusBody(SoftplusOp, OpBuilder &b, Location l, Type t, Value x) {
  Value zero = floatConst(b, l, t, 0.0), one = floatConst(b, l, t, 1.0);
  Value e = math::ExpOp::create(b, l, arith::NegFOp::create(b, l, math::AbsFOp::create(b, l, x)));
  Value u = arith::AddFOp::create(b, l, one, e);
  Value d = arith::SubFOp::create(b, l, u, one);
  Value ratio = arith::DivFOp::create(b, l, e, d);
  Value lg = arith::MulFOp::create(b, l, math::LogOp::create(b, l, u), ratio);
  Value exact = arith::CmpFOp::create(b, l, arith::CmpFPredicate::OEQ, d, zero);
  Value log1p = arith::SelectOp::create(b, l, exact, e, lg);
  return arith::AddFOp::create(b, l, arith::MaximumFOp::create(b, l, x, zero), log1p);
}

Value eluBody(EluOp op, OpBuilder &b, Location l, Type, Value x) {
  return eluValue(b, l, x, op.getAlpha().convertToDouble());
}

/// A unary op computed elementwise by Body.
template <class OpT, Value (*Body)(OpT, OpBuilder &, Location, Type, Value)>
struct UnaryLowering : OpRewritePattern<OpT> {
  using OpRewritePattern<OpT>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpT op, PatternRewriter &rw) const override {
    Type elem = tensorType(op.getResult()).getElementType();
    rw.replaceOp(op, elementwise(rw, op.getLoc(), op.getX(), elem, {op.getX()},
                                 [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                                   return Body(op, b, l, elem, a[0]);
                                 }));
    return success();
  }
};

/// Reduces `x` over `axis` into a tensor without that axis: acc = combine(acc, x...).
Value reduceAxis(OpBuilder &b, Location loc, Value x, int64_t axis, ValueRange extraInputs,
                 ArrayRef<bool> extraReduced, double init, BodyFn body) {
  MLIRContext *ctx = b.getContext();
  auto xt = tensorType(x);
  unsigned r = xt.getRank();
  SmallVector<unsigned> kept;
  SmallVector<OpFoldResult> sizes;
  for (unsigned i = 0; i < r; ++i)
    if (i != axis) {
      kept.push_back(i);
      sizes.push_back(sizeOf(b, loc, x, i));
    }
  Value acc = filled(b, loc, sizes, xt.getElementType(), init);
  SmallVector<Value> inputs{x};
  SmallVector<AffineMap> maps{dimsMap(ctx, r, range(0, r))};
  for (auto [v, red] : llvm::zip(extraInputs, extraReduced)) {
    inputs.push_back(v);
    maps.push_back(red ? dimsMap(ctx, r, kept) : dimsMap(ctx, r, range(0, r)));
  }
  auto it = iterators(r);
  it[axis] = utils::IteratorType::reduction;
  return generic(b, loc, acc, inputs, maps, dimsMap(ctx, r, kept), it, body);
}

struct SoftmaxLowering : OpRewritePattern<SoftmaxOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SoftmaxOp op, PatternRewriter &rw) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rw.getContext();
    Value x = op.getX();
    auto xt = tensorType(x);
    Type elem = xt.getElementType();
    unsigned r = xt.getRank();
    int64_t axis = normalizeAxis(op.getAxis(), r);
    double ninf = -std::numeric_limits<double>::infinity();
    // m = max over the axis; m' = m == -inf ? 0 : m, so a fully masked row gives
    // exp(-inf - 0) = 0 everywhere and a zero sum instead of NaN.
    auto safeMax = [&](OpBuilder &b, Location l, Value m) -> Value {
      Value isInf =
          arith::CmpFOp::create(b, l, arith::CmpFPredicate::OEQ, m, floatConst(b, l, elem, ninf));
      return arith::SelectOp::create(b, l, isInf, floatConst(b, l, elem, 0.0), m);
    };
    Value mx = reduceAxis(rw, loc, x, axis, {}, {}, ninf,
                          [](OpBuilder &b, Location l, ValueRange a) -> Value {
                            return arith::MaximumFOp::create(b, l, a[0], a[1]);
                          });
    Value sum = reduceAxis(
        rw, loc, x, axis, {mx}, {true}, 0.0, [&](OpBuilder &b, Location l, ValueRange a) -> Value {
          Value e =
              math::ExpOp::create(b, l, arith::SubFOp::create(b, l, a[0], safeMax(b, l, a[1])));
          return arith::AddFOp::create(b, l, a[2], e);
        });
    SmallVector<unsigned> kept;
    for (unsigned i = 0; i < r; ++i)
      if (i != axis)
        kept.push_back(i);
    Value init = emptyOf(rw, loc, sizesOf(rw, loc, x), elem);
    Value res =
        generic(rw, loc, init, {x, mx, sum},
                {dimsMap(ctx, r, range(0, r)), dimsMap(ctx, r, kept), dimsMap(ctx, r, kept)},
                dimsMap(ctx, r, range(0, r)), iterators(r),
                [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                  Value e = math::ExpOp::create(
                      b, l, arith::SubFOp::create(b, l, a[0], safeMax(b, l, a[1])));
                  // sum > 0, or NaN: a NaN in the row makes the row NaN.
                  Value pos = arith::CmpFOp::create(b, l, arith::CmpFPredicate::UGT, a[2],
                                                    floatConst(b, l, elem, 0.0));
                  Value q = arith::DivFOp::create(b, l, e, a[2]);
                  return arith::SelectOp::create(b, l, pos, q, floatConst(b, l, elem, 0.0));
                });
    rw.replaceOp(op, res);
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
  sizes.push_back(tensor::getMixedSize(rw, loc, x, r - 2));
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

/// Normalisation over the last axis: layer_norm (mean and variance) or rms_norm.
Value normalize(PatternRewriter &rw, Location loc, Value x, Value gamma, Value beta, double eps,
                bool rms) {
  MLIRContext *ctx = rw.getContext();
  auto xt = tensorType(x);
  unsigned r = xt.getRank();
  Type elem = xt.getElementType();
  Value n = indexToFloat(rw, loc, sizeValue(rw, loc, x, r - 1), elem);
  auto add = [](OpBuilder &b, Location l, ValueRange a) -> Value {
    return arith::AddFOp::create(b, l, a[0], a[1]);
  };
  Value mean;
  if (!rms) {
    Value sum = reduceAxis(rw, loc, x, r - 1, {}, {}, 0.0, add);
    mean = elementwise(rw, loc, sum, elem, {sum},
                       [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                         return arith::DivFOp::create(b, l, a[0], n);
                       });
  }
  // sum of squares of (x - mean) (layer_norm) or of x (rms_norm)
  Value sq = reduceAxis(rw, loc, x, r - 1, rms ? ValueRange{} : ValueRange{mean},
                        rms ? ArrayRef<bool>{} : ArrayRef<bool>{true}, 0.0,
                        [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                          Value c = rms ? a[0] : Value(arith::SubFOp::create(b, l, a[0], a[1]));
                          Value s = arith::MulFOp::create(b, l, c, c);
                          return arith::AddFOp::create(b, l, a.back(), s);
                        });
  SmallVector<Value> inputs{x, sq};
  SmallVector<unsigned> kept = range(0, r - 1);
  SmallVector<AffineMap> maps{dimsMap(ctx, r, range(0, r)), dimsMap(ctx, r, kept)};
  if (!rms) {
    inputs.push_back(mean);
    maps.push_back(dimsMap(ctx, r, kept));
  }
  int gi = -1, bi = -1;
  if (gamma) {
    gi = inputs.size();
    inputs.push_back(gamma);
    maps.push_back(dimsMap(ctx, r, {r - 1}));
  }
  if (beta) {
    bi = inputs.size();
    inputs.push_back(beta);
    maps.push_back(dimsMap(ctx, r, {r - 1}));
  }
  Value init = emptyOf(rw, loc, sizesOf(rw, loc, x), elem);
  return generic(rw, loc, init, inputs, maps, dimsMap(ctx, r, range(0, r)), iterators(r),
                 [&](OpBuilder &b, Location l, ValueRange a) -> Value {
                   Value var = arith::DivFOp::create(b, l, a[1], n);
                   Value denom = math::SqrtOp::create(
                       b, l, arith::AddFOp::create(b, l, var, floatConst(b, l, elem, eps)));
                   Value c = rms ? a[0] : Value(arith::SubFOp::create(b, l, a[0], a[2]));
                   Value y = arith::DivFOp::create(b, l, c, denom);
                   if (gi >= 0)
                     y = arith::MulFOp::create(b, l, y, a[gi]);
                   if (bi >= 0)
                     y = arith::AddFOp::create(b, l, y, a[bi]);
                   return y;
                 });
}

struct LayerNormLowering : OpRewritePattern<LayerNormOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LayerNormOp op, PatternRewriter &rw) const override {
    rw.replaceOp(op, normalize(rw, op.getLoc(), op.getX(), op.getGamma(), op.getBeta(),
                               op.getEps().convertToDouble(), false));
    return success();
  }
};

struct RmsNormLowering : OpRewritePattern<RmsNormOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(RmsNormOp op, PatternRewriter &rw) const override {
    rw.replaceOp(op, normalize(rw, op.getLoc(), op.getX(), op.getGamma(), Value(),
                               op.getEps().convertToDouble(), true));
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

struct LinformerProjectLowering : OpRewritePattern<LinformerProjectOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LinformerProjectOp op, PatternRewriter &rw) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rw.getContext();
    Value x = op.getLhs(), e = op.getRhs();
    unsigned r = tensorType(x).getRank(), p = r - 2;
    // loops: (p..., k', d, s)
    unsigned kk = p, d = p + 1, s = p + 2, loops = r + 1;
    SmallVector<OpFoldResult> sizes;
    for (unsigned i = 0; i < p; ++i)
      sizes.push_back(sizeOf(rw, loc, x, i));
    sizes.push_back(sizeOf(rw, loc, e, 0));
    sizes.push_back(sizeOf(rw, loc, x, r - 1));
    Type elem = tensorType(op.getResult()).getElementType();
    Value init = filled(rw, loc, sizes, elem, 0.0);
    auto xm = range(0, p);
    xm.append({s, d});
    auto om = range(0, p);
    om.append({kk, d});
    Value res =
        generic(rw, loc, init, {x, e}, {dimsMap(ctx, loops, xm), dimsMap(ctx, loops, {kk, s})},
                dimsMap(ctx, loops, om), iterators(r, 1),
                [](OpBuilder &b, Location l, ValueRange a) -> Value {
                  return arith::AddFOp::create(b, l, a[2], arith::MulFOp::create(b, l, a[0], a[1]));
                });
    rw.replaceOp(op, res);
    return success();
  }
};

/// phi(t), elementwise: relu, or elu(x) + 1 computed as x > 0 ? x + 1 : exp(x) ((exp(x) -
/// 1) + 1 would cancel to 0 for very negative x, where exp(x) is the tiny, nonzero answer).
Value featureMap(OpBuilder &rw, Location loc, Value t, Type elem, bool relu) {
  return elementwise(rw, loc, t, elem, {t}, [&](OpBuilder &b, Location l, ValueRange a) -> Value {
    Value zero = floatConst(b, l, elem, 0.0);
    if (relu)
      return arith::MaximumFOp::create(b, l, a[0], zero);
    Value pos = arith::CmpFOp::create(b, l, arith::CmpFPredicate::OGT, a[0], zero);
    return arith::SelectOp::create(b, l, pos,
                                   arith::AddFOp::create(b, l, a[0], floatConst(b, l, elem, 1.0)),
                                   math::ExpOp::create(b, l, a[0]));
  });
}

/// acc + a * b: the body of linear attention's contractions.
Value mulAdd(OpBuilder &b, Location l, ValueRange a) {
  return arith::AddFOp::create(b, l, a[2], arith::MulFOp::create(b, l, a[0], a[1]));
}

/// Linear attention's operands after phi, and their leading dims (B?, H?): `lead` of them;
/// with heads, query head h reads kv head h floordiv `group`.
struct LinearAttentionParts {
  Value pq, pk, q, v;
  Type elem;
  unsigned r, lead;
  int64_t group;

  /// The kv side's leading dims in terms of the query side's loops.
  SmallVector<AffineExpr> kvLead(MLIRContext *ctx) const {
    SmallVector<AffineExpr> ex;
    for (unsigned i = 0; i < lead; ++i) {
      AffineExpr e = getAffineDimExpr(i, ctx);
      ex.push_back(i == lead - 1 && r >= 3 && group > 1 ? e.floorDiv(group) : e);
    }
    return ex;
  }
};

/// kv[lead..., dh, dv] = sum_s phi(k)[lead..., s, dh] * v[lead..., s, dv] and
/// ksum[lead..., dh] = sum_s phi(k)[lead..., s, dh].
std::pair<Value, Value> linearAttentionState(OpBuilder &rw, Location loc,
                                             const LinearAttentionParts &p) {
  MLIRContext *ctx = rw.getContext();
  unsigned lead = p.lead, dh = lead, dv = lead + 1, s = lead + 2, loops = lead + 3;
  SmallVector<OpFoldResult> kvSizes;
  for (unsigned i = 0; i < lead; ++i)
    kvSizes.push_back(sizeOf(rw, loc, p.pk, i));
  kvSizes.push_back(sizeOf(rw, loc, p.pk, p.r - 1));
  kvSizes.push_back(sizeOf(rw, loc, p.v, p.r - 1));
  auto km = range(0, lead), vm = range(0, lead), kvm = range(0, lead);
  km.append({s, dh});
  vm.append({s, dv});
  kvm.append({dh, dv});
  Value kv = generic(rw, loc, filled(rw, loc, kvSizes, p.elem, 0.0), {p.pk, p.v},
                     {dimsMap(ctx, loops, km), dimsMap(ctx, loops, vm)}, dimsMap(ctx, loops, kvm),
                     iterators(lead + 2, 1), mulAdd);
  SmallVector<OpFoldResult> ksSizes(kvSizes.begin(), kvSizes.end() - 1);
  unsigned loops2 = lead + 2, dh2 = lead, s2 = lead + 1;
  auto km2 = range(0, lead), ksm = range(0, lead);
  km2.append({s2, dh2});
  ksm.push_back(dh2);
  Value ksum =
      generic(rw, loc, filled(rw, loc, ksSizes, p.elem, 0.0), {p.pk}, {dimsMap(ctx, loops2, km2)},
              dimsMap(ctx, loops2, ksm), iterators(lead + 1, 1),
              [](OpBuilder &b, Location l, ValueRange a) -> Value {
                return arith::AddFOp::create(b, l, a[0], a[1]);
              });
  return {kv, ksum};
}

/// num[lead..., l, dv] = sum_dh phi(q)[lead..., l, dh] * kv[lead'..., dh, dv],
/// den[lead..., l] = sum_dh phi(q)[lead..., l, dh] * ksum[lead'..., dh], and
/// out = den != 0 ? num / den : 0.
Value linearAttentionOutput(OpBuilder &rw, Location loc, const LinearAttentionParts &p, Value kv,
                            Value ksum) {
  MLIRContext *ctx = rw.getContext();
  unsigned lead = p.lead, r = p.r, L = lead, DV = lead + 1, DH = lead + 2, loops3 = lead + 3;
  Type elem = p.elem;
  SmallVector<OpFoldResult> outSizes;
  for (unsigned i = 0; i < lead + 1; ++i)
    outSizes.push_back(sizeOf(rw, loc, p.q, i));
  outSizes.push_back(sizeOf(rw, loc, p.v, r - 1));
  auto qm = range(0, lead), om = range(0, lead);
  qm.append({L, DH});
  om.append({L, DV});
  SmallVector<AffineExpr> kvEx = p.kvLead(ctx);
  kvEx.append({getAffineDimExpr(DH, ctx), getAffineDimExpr(DV, ctx)});
  Value num = generic(rw, loc, filled(rw, loc, outSizes, elem, 0.0), {p.pq, kv},
                      {dimsMap(ctx, loops3, qm), AffineMap::get(loops3, 0, kvEx, ctx)},
                      dimsMap(ctx, loops3, om), iterators(lead + 2, 1), mulAdd);
  unsigned L4 = lead, DH4 = lead + 1, loops4 = lead + 2;
  SmallVector<OpFoldResult> denSizes(outSizes.begin(), outSizes.end() - 1);
  auto qm4 = range(0, lead), dm = range(0, lead);
  qm4.append({L4, DH4});
  dm.push_back(L4);
  SmallVector<AffineExpr> ksEx = p.kvLead(ctx);
  ksEx.push_back(getAffineDimExpr(DH4, ctx));
  Value den = generic(rw, loc, filled(rw, loc, denSizes, elem, 0.0), {p.pq, ksum},
                      {dimsMap(ctx, loops4, qm4), AffineMap::get(loops4, 0, ksEx, ctx)},
                      dimsMap(ctx, loops4, dm), iterators(lead + 1, 1), mulAdd);
  return generic(
      rw, loc, emptyOf(rw, loc, outSizes, elem), {num, den},
      {dimsMap(ctx, r, range(0, r)), dimsMap(ctx, r, range(0, r - 1))},
      dimsMap(ctx, r, range(0, r)), iterators(r),
      [&](OpBuilder &b, Location l, ValueRange a) -> Value {
        Value zero = floatConst(b, l, elem, 0.0);
        Value nz = arith::CmpFOp::create(b, l, arith::CmpFPredicate::UNE, a[1], zero);
        return arith::SelectOp::create(b, l, nz, arith::DivFOp::create(b, l, a[0], a[1]), zero);
      });
}

struct LinearAttentionLowering : OpRewritePattern<LinearAttentionOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LinearAttentionOp op, PatternRewriter &rw) const override {
    Location loc = op.getLoc();
    Value q = op.getQ(), k = op.getK();
    auto qt = tensorType(q), kt = tensorType(k);
    LinearAttentionParts p;
    p.q = q;
    p.v = op.getV();
    p.elem = qt.getElementType();
    p.r = qt.getRank();
    p.lead = p.r - 2;
    p.group = 1;
    if (p.r >= 3) {
      int64_t hq = qt.getDimSize(p.r - 3), hk = kt.getDimSize(p.r - 3);
      p.group = hq == hk || ShapedType::isDynamic(hq) ? 1 : hq / hk;
    }
    bool relu = op.getFeatureMap() == "relu";
    p.pq = featureMap(rw, loc, q, p.elem, relu);
    p.pk = featureMap(rw, loc, k, p.elem, relu);
    auto [kv, ksum] = linearAttentionState(rw, loc, p);
    rw.replaceOp(op, linearAttentionOutput(rw, loc, p, kv, ksum));
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

struct LowerToLinalgPass : qkv::ir::impl::LowerToLinalgBase<LowerToLinalgPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns
        .add<MatMulLowering, LinearLowering, TransposeLowering, BinaryLowering<AddOp>,
             BinaryLowering<SubOp>, BinaryLowering<MulOp>, BinaryLowering<DivOp>,
             BinaryLowering<SwigluOp>, UnaryLowering<ScaleOp, scaleBody>,
             UnaryLowering<GeluOp, geluBody>, UnaryLowering<SiluOp, siluBody>,
             UnaryLowering<EluOp, eluBody>,
             UnaryLowering<SoftplusOp, softplusBody>, SoftmaxLowering, SplitHeadsLowering, MergeHeadsLowering,
             ConcatLowering, MaskLowering, ScoreModLowering, SinusoidalPELowering, RopeLowering,
             LayerNormLowering, RmsNormLowering, EmbeddingLowering, LinformerProjectLowering,
             LinearAttentionLowering, CacheViewLowering, PagedCacheViewLowering>(&getContext());
    GreedyRewriteConfig config;
    config.setStrictness(GreedyRewriteStrictness::ExistingOps);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns), config)))
      return signalPassFailure();
    // Anything left of the qkv dialect (except attention, which has its own pass, and
    // the checks, which qkv-lower-checks turns into calls) is a missing lowering: fail
    // loudly rather than let a later stage choke on it.
    WalkResult wr = getOperation().walk([&](Operation *op) {
      if (isa<QkvDialect>(op->getDialect()) && !isa<AttentionOp, CheckOp, YieldOp>(op) &&
          !op->getParentOfType<AttentionOp>()) {
        op->emitError("qkv-lower-to-linalg: no lowering for this op");
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    if (wr.wasInterrupted())
      signalPassFailure();
  }
};

struct CopyRepeatedResultsPass
    : qkv::ir::impl::CopyRepeatedResultsBase<CopyRepeatedResultsPass> {
  void runOnOperation() override {
    getOperation().walk([&](func::ReturnOp ret) {
      OpBuilder b(ret);
      llvm::DenseSet<Value> seen;
      for (OpOperand &o : ret->getOpOperands()) {
        Value v = o.get();
        auto ty = dyn_cast<RankedTensorType>(v.getType());
        if (!ty || seen.insert(v).second)
          continue;
        Location loc = ret.getLoc();
        SmallVector<Value> dyn;
        for (int64_t i = 0; i < ty.getRank(); ++i)
          if (ty.isDynamicDim(i))
            dyn.push_back(tensor::DimOp::create(b, loc, v, i));
        Value init = tensor::EmptyOp::create(b, loc, ty, dyn);
        o.set(linalg::CopyOp::create(b, loc, v, init).getResult(0));
      }
    });
  }
};

} // namespace
