// qkv.matmul, qkv.linear, qkv.linformer_project and qkv.linear_attention as linalg: the
// products as named ops (linalg.matmul, linalg.batch_matmul) that
// qkv-lower-matmul-to-microkernels turns into register-tiled code, or linalg.generic for
// shapes the named ops do not take.
#include "QkvToLinalg.h"

#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using namespace qkv::ir;

namespace {


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

} // namespace

void qkv::ir::populateQkvProductsToLinalgPatterns(RewritePatternSet &patterns) {
  patterns.add<MatMulLowering, LinearLowering, LinformerProjectLowering, LinearAttentionLowering>(patterns.getContext());
}
