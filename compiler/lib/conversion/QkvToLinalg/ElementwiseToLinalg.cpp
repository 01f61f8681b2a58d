// The elementwise qkv ops (add, sub, mul, div, swiglu, geglu, scale, gelu, silu, elu, softplus,
// sigmoid, relu) and the reductions along one axis (softmax, layer_norm, rms_norm) as
// linalg.generic, computing what the interpreter computes.
#include "QkvToLinalg.h"

#include <cmath>

#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using namespace qkv::ir;

namespace {

Value sigmoidTimes(OpBuilder &b, Location loc, Value x, Value y) {
  // x * sigmoid(x) * ... : silu(x) = x / (1 + exp(-x)).
  Type t = x.getType();
  Value one = floatConst(b, loc, t, 1.0);
  Value e = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, x));
  Value s = arith::DivFOp::create(b, loc, x, arith::AddFOp::create(b, loc, one, e));
  return y ? Value(arith::MulFOp::create(b, loc, s, y)) : s;
}

Value geluValue(OpBuilder &b, Location l, Type t, Value x, bool approximate);

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
                              else if constexpr (std::is_same_v<OpT, GegluOp>)
                                return arith::MulFOp::create(
                                    bb, l, geluValue(bb, l, args[0].getType(), args[0], false),
                                    args[1]);
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

/// GELU of x: exact, 0.5 x (1 + erf(x / sqrt 2)), or the tanh approximation.
Value geluValue(OpBuilder &b, Location l, Type t, Value x, bool approximate) {
  Value inner;
  if (approximate) { // tanh(sqrt(2/pi) (x + 0.044715 x^3))
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

Value geluBody(GeluOp op, OpBuilder &b, Location l, Type t, Value x) {
  return geluValue(b, l, t, x, op.getApproximate());
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

/// 1 / (1 + e^-x): 0 where e^-x overflows, never NaN.
Value sigmoidBody(SigmoidOp, OpBuilder &b, Location l, Type t, Value x) {
  Value one = floatConst(b, l, t, 1.0);
  Value e = math::ExpOp::create(b, l, arith::NegFOp::create(b, l, x));
  return arith::DivFOp::create(b, l, one, arith::AddFOp::create(b, l, one, e));
}

/// max(x, 0): arith.maximumf keeps a NaN.
Value reluBody(ReluOp, OpBuilder &b, Location l, Type t, Value x) {
  return arith::MaximumFOp::create(b, l, x, floatConst(b, l, t, 0.0));
}

Value eluBody(EluOp op, OpBuilder &b, Location l, Type, Value x) {
  return eluValue(b, l, x, op.getAlpha().convertToDouble());
}

/// cap * tanh(x / cap), as x * (1 / cap) so that the division is by a constant once.
Value softcapBody(SoftcapOp op, OpBuilder &b, Location l, Type t, Value x) {
  double cap = op.getCap().convertToDouble();
  Value u = arith::MulFOp::create(b, l, x, floatConst(b, l, t, 1.0 / cap));
  return arith::MulFOp::create(b, l, floatConst(b, l, t, cap), math::TanhOp::create(b, l, u));
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

} // namespace

void qkv::ir::populateQkvElementwiseToLinalgPatterns(RewritePatternSet &patterns) {
  patterns.add<BinaryLowering<AddOp>, BinaryLowering<SubOp>, BinaryLowering<MulOp>,
               BinaryLowering<DivOp>, BinaryLowering<SwigluOp>, BinaryLowering<GegluOp>,
               UnaryLowering<ScaleOp, scaleBody>, UnaryLowering<GeluOp, geluBody>,
               UnaryLowering<SiluOp, siluBody>, UnaryLowering<EluOp, eluBody>,
               UnaryLowering<SoftcapOp, softcapBody>, UnaryLowering<SoftplusOp, softplusBody>,
               UnaryLowering<SigmoidOp, sigmoidBody>, UnaryLowering<ReluOp, reluBody>,
               SoftmaxLowering, LayerNormLowering, RmsNormLowering>(patterns.getContext());
}
