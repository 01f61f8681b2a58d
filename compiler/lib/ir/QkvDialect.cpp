// The qkv dialect: op verifiers. Import builds well-typed IR from a verified Graph; the
// verifiers guard IR written by hand for qkv-opt and IR produced by passes.
#include "qkv/compiler/ir/QkvDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include <qkv/dsl/op_lists.hpp> // the lists of QkvOps.td's generated ops

using namespace mlir;
using namespace qkv::ir;

#include "qkv/compiler/ir/QkvOpsDialect.cpp.inc"

void QkvDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "qkv/compiler/ir/QkvOps.cpp.inc"
      >();
}

#define GET_OP_CLASSES
#include "qkv/compiler/ir/QkvOps.cpp.inc"

namespace {

RankedTensorType rt(Value v) { return cast<RankedTensorType>(v.getType()); }

bool compatible(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

LogicalResult sameShape(Operation *op, RankedTensorType a, RankedTensorType b, StringRef what) {
  if (a.getRank() != b.getRank())
    return op->emitOpError() << what << ": rank " << a.getRank() << " vs " << b.getRank();
  for (int64_t i = 0; i < a.getRank(); ++i)
    if (!compatible(a.getDimSize(i), b.getDimSize(i)))
      return op->emitOpError() << what << ": dim " << i << " is " << a.getDimSize(i) << " vs "
                               << b.getDimSize(i);
  if (a.getElementType() != b.getElementType())
    return op->emitOpError() << what << ": element types differ";
  return success();
}

LogicalResult checkAxis(Operation *op, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return op->emitOpError() << "axis " << axis << " out of range for rank " << rank;
  return success();
}

/// Mod region block arguments: [score,] b, h, q, kv, len_q, len_kv, captures...
LogicalResult verifyModRegion(Operation *op, Region &region, bool withScore, Type scoreType,
                              ValueRange captures, StringRef name) {
  if (region.empty())
    return success();
  Block &block = region.front();
  unsigned lead = withScore ? 7 : 6;
  if (block.getNumArguments() != lead + captures.size())
    return op->emitOpError() << name << " region needs " << lead + captures.size()
                             << " block arguments (" << (withScore ? "score, " : "")
                             << "b, h, q, kv, len_q, len_kv, then one per capture), got "
                             << block.getNumArguments();
  unsigned i = 0;
  if (withScore && block.getArgument(i++).getType() != scoreType)
    return op->emitOpError() << name << " region's first argument must be the score (" << scoreType
                             << ")";
  for (unsigned j = 0; j < 6; ++j, ++i)
    if (!block.getArgument(i).getType().isIndex())
      return op->emitOpError() << name << " region's position arguments must be index";
  for (Value c : captures)
    if (block.getArgument(i++).getType() != c.getType())
      return op->emitOpError() << name << " region's capture argument types must match the "
                               << "captured operands";
  auto yield = dyn_cast<YieldOp>(block.getTerminator());
  if (!yield)
    return op->emitOpError() << name << " region must end in qkv.yield";
  Type want = withScore ? scoreType : IntegerType::get(op->getContext(), 1);
  if (yield.getValue().getType() != want)
    return op->emitOpError() << name << " region must yield " << want << ", yields "
                             << yield.getValue().getType();
  return success();
}

} // namespace

// ---- unary -------------------------------------------------------------------------------

LogicalResult SoftmaxOp::verify() {
  if (failed(checkAxis(*this, getAxis(), rt(getX()).getRank())))
    return failure();
  return sameShape(*this, rt(getX()), rt(getResult()), "result");
}

LogicalResult SinusoidalPEOp::verify() {
  if (rt(getX()).getRank() < 2)
    return emitOpError("needs at least 2 dims (position, feature)");
  return sameShape(*this, rt(getX()), rt(getResult()), "result");
}

LogicalResult RopeOp::verify() {
  auto t = rt(getX());
  if (t.getRank() < 2)
    return emitOpError("needs at least 2 dims (L, Dh)");
  int64_t d = t.getDimSize(t.getRank() - 1);
  if (ShapedType::isDynamic(d) || d % 2)
    return emitOpError("needs a static, even last dim");
  if (Value p = getPositions()) {
    auto pt = rt(p);
    int64_t l = t.getDimSize(t.getRank() - 2);
    bool ok = (pt.getRank() == 1 && compatible(pt.getDimSize(0), l)) ||
              (pt.getRank() == 2 && t.getRank() >= 3 &&
               compatible(pt.getDimSize(0), t.getDimSize(0)) && compatible(pt.getDimSize(1), l));
    if (!ok)
      return emitOpError("positions must be (L) or (B, L) of x (..., L, Dh)");
    if (getOffset() != 0)
      return emitOpError("positions and an offset cannot be combined");
  }
  return sameShape(*this, t, rt(getResult()), "result");
}

LogicalResult TransposeOp::verify() {
  auto in = rt(getX()), out = rt(getResult());
  int64_t r = in.getRank();
  if (failed(checkAxis(*this, getAxisA(), r)) || failed(checkAxis(*this, getAxisB(), r)))
    return failure();
  if (out.getRank() != r)
    return emitOpError("result rank differs");
  int64_t a = (getAxisA() + r) % r, b = (getAxisB() + r) % r;
  for (int64_t i = 0; i < r; ++i) {
    int64_t src = i == a ? b : i == b ? a : i;
    if (!compatible(in.getDimSize(src), out.getDimSize(i)))
      return emitOpError() << "result dim " << i << " must be input dim " << src;
  }
  return success();
}

LogicalResult SplitHeadsOp::verify() {
  auto in = rt(getX()), out = rt(getResult());
  int64_t r = in.getRank();
  if (r < 2 || out.getRank() != r + 1)
    return emitOpError("(..., L, H*Dh) -> (..., H, L, Dh)");
  int64_t h = getHeads();
  if (h < 1 || !compatible(out.getDimSize(r - 2), h))
    return emitOpError() << "result heads dim must be " << h;
  if (!compatible(out.getDimSize(r - 1), in.getDimSize(r - 2)))
    return emitOpError("result L must be the input's L");
  int64_t f = in.getDimSize(r - 1), dh = out.getDimSize(r);
  if (ShapedType::isDynamic(dh))
    return emitOpError("head dim must be static");
  if (!ShapedType::isDynamic(f) && f != h * dh)
    return emitOpError() << "input features " << f << " != heads " << h << " * head dim " << dh;
  return success();
}

LogicalResult MergeHeadsOp::verify() {
  auto in = rt(getX()), out = rt(getResult());
  int64_t r = in.getRank();
  if (r < 3 || out.getRank() != r - 1)
    return emitOpError("(..., H, L, Dh) -> (..., L, H*Dh)");
  // Heads or head dim may be dynamic (merge_heads of (B, L, D) with D bound at run time):
  // the lowering's collapse_shape computes the product at run time.
  int64_t h = in.getDimSize(r - 3), dh = in.getDimSize(r - 1);
  if (ShapedType::isDynamic(h) || ShapedType::isDynamic(dh))
    return success();
  if (!compatible(out.getDimSize(r - 2), h * dh))
    return emitOpError() << "result features must be " << h * dh;
  return success();
}

// ---- binary -------------------------------------------------------------------------------

static LogicalResult verifyBroadcast(Operation *op, Value lhs, Value rhs, Value result) {
  auto a = rt(lhs), b = rt(rhs), o = rt(result);
  auto &lng = a.getRank() >= b.getRank() ? a : b;
  auto &sht = a.getRank() >= b.getRank() ? b : a;
  int64_t off = lng.getRank() - sht.getRank();
  for (int64_t i = 0; i < sht.getRank(); ++i)
    if (!compatible(lng.getDimSize(off + i), sht.getDimSize(i)))
      return op->emitOpError("the shorter operand's dims must end the longer's");
  return sameShape(op, lng, o, "result");
}

#define QKV_VERIFY_BINARY(kind, builder, bound, summary)                                       \
  LogicalResult kind##Op::verify() {                                                           \
    return verifyBroadcast(*this, getLhs(), getRhs(), getResult());                            \
  }
QKV_BROADCAST_BINARY(QKV_VERIFY_BINARY)
#undef QKV_VERIFY_BINARY

LogicalResult SwigluOp::verify() {
  if (failed(sameShape(*this, rt(getLhs()), rt(getRhs()), "gate and up")))
    return failure();
  return sameShape(*this, rt(getLhs()), rt(getResult()), "result");
}

LogicalResult MatMulOp::verify() {
  auto a = rt(getLhs()), b = rt(getRhs()), o = rt(getResult());
  if (a.getRank() < 2 || b.getRank() < 2)
    return emitOpError("operands need at least 2 dims");
  if (!compatible(a.getDimSize(a.getRank() - 1), b.getDimSize(b.getRank() - 2)))
    return emitOpError("contraction dims differ");
  int64_t r = std::max(a.getRank(), b.getRank());
  if (a.getRank() != b.getRank() && a.getRank() != 2 && b.getRank() != 2)
    return emitOpError("batch dims must match, or one operand must be 2-D");
  if (o.getRank() != r)
    return emitOpError() << "result must have rank " << r;
  // Batch dims: equal in both operands (or only in the one that is not 2-D), and the result's.
  for (int64_t i = 0; i < r - 2; ++i) {
    int64_t ai = a.getRank() == r ? a.getDimSize(i) : ShapedType::kDynamic;
    int64_t bi = b.getRank() == r ? b.getDimSize(i) : ShapedType::kDynamic;
    if (!compatible(ai, bi))
      return emitOpError() << "batch dim " << i << " differs: " << ai << " vs " << bi;
    if (!compatible(o.getDimSize(i), a.getRank() == r ? ai : bi))
      return emitOpError() << "result batch dim " << i << " must be the operands'";
  }
  if (!compatible(o.getDimSize(r - 2), a.getDimSize(a.getRank() - 2)) ||
      !compatible(o.getDimSize(r - 1), b.getDimSize(b.getRank() - 1)))
    return emitOpError("result must be (..., M, N)");
  return success();
}

LogicalResult LinformerProjectOp::verify() {
  auto x = rt(getLhs()), e = rt(getRhs()), o = rt(getResult());
  if (x.getRank() < 2 || e.getRank() != 2 || o.getRank() != x.getRank())
    return emitOpError("x (..., S, D), e (K', S) -> (..., K', D)");
  if (!compatible(e.getDimSize(1), x.getDimSize(x.getRank() - 2)))
    return emitOpError("e's last dim must be x's sequence dim");
  return success();
}

LogicalResult LinearOp::verify() {
  auto x = rt(getX()), w = rt(getWeight()), o = rt(getResult());
  if (w.getRank() != 2)
    return emitOpError("weight must be (in, out)");
  if (x.getRank() < 1)
    return emitOpError("x must have at least 1 dim (..., in)");
  if (!compatible(x.getDimSize(x.getRank() - 1), w.getDimSize(0)))
    return emitOpError("x's last dim must be the weight's first");
  if (getBias() &&
      (rt(getBias()).getRank() != 1 || !compatible(rt(getBias()).getDimSize(0), w.getDimSize(1))))
    return emitOpError("bias must be (out)");
  if (o.getRank() != x.getRank() || !compatible(o.getDimSize(o.getRank() - 1), w.getDimSize(1)))
    return emitOpError("result must be (..., out)");
  return success();
}

static LogicalResult verifyNormParam(Operation *op, Value p, RankedTensorType x, StringRef n) {
  if (!p)
    return success();
  auto t = rt(p);
  if (t.getRank() != 1 || !compatible(t.getDimSize(0), x.getDimSize(x.getRank() - 1)))
    return op->emitOpError() << n << " must be (features)";
  return success();
}

LogicalResult LayerNormOp::verify() {
  auto x = rt(getX());
  if (x.getRank() < 1)
    return emitOpError("x must have at least 1 dim (..., features)");
  if (failed(verifyNormParam(*this, getGamma(), x, "gamma")) ||
      failed(verifyNormParam(*this, getBeta(), x, "beta")))
    return failure();
  return sameShape(*this, x, rt(getResult()), "result");
}

LogicalResult RmsNormOp::verify() {
  auto x = rt(getX());
  if (x.getRank() < 1)
    return emitOpError("x must have at least 1 dim (..., features)");
  if (failed(verifyNormParam(*this, getGamma(), x, "gamma")))
    return failure();
  return sameShape(*this, x, rt(getResult()), "result");
}

LogicalResult ConcatOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one input");
  auto first = rt(getInputs().front());
  if (failed(checkAxis(*this, getAxis(), first.getRank())))
    return failure();
  int64_t ax = (getAxis() + first.getRank()) % first.getRank();
  int64_t total = 0;
  for (Value v : getInputs()) {
    auto t = rt(v);
    if (t.getRank() != first.getRank())
      return emitOpError("inputs must have the same rank");
    if (t.getElementType() != first.getElementType())
      return emitOpError("inputs must have the same element type");
    for (int64_t i = 0; i < t.getRank(); ++i)
      if (i != ax && !compatible(t.getDimSize(i), first.getDimSize(i)))
        return emitOpError() << "inputs differ in dim " << i;
    total = ShapedType::isDynamic(total) || t.isDynamicDim(ax) ? ShapedType::kDynamic
                                                               : total + t.getDimSize(ax);
  }
  auto o = rt(getResult());
  if (o.getRank() != first.getRank() || o.getElementType() != first.getElementType())
    return emitOpError("result must have the inputs' rank and element type");
  for (int64_t i = 0; i < o.getRank(); ++i)
    if (!compatible(o.getDimSize(i), i == ax ? total : first.getDimSize(i)))
      return emitOpError() << "result dim " << i << " must be "
                           << (i == ax ? "the sum of the inputs'" : "the inputs'");
  return success();
}

LogicalResult EmbeddingOp::verify() {
  auto ids = rt(getIds()), table = rt(getTable()), o = rt(getResult());
  if (table.getRank() != 2)
    return emitOpError("table must be (vocab, features)");
  if (o.getRank() != ids.getRank() + 1 || o.getElementType() != table.getElementType())
    return emitOpError("result must be (ids..., features) of the table's element type");
  for (int64_t i = 0; i < o.getRank(); ++i)
    if (!compatible(o.getDimSize(i), i < ids.getRank() ? ids.getDimSize(i) : table.getDimSize(1)))
      return emitOpError() << "result dim " << i << " must be "
                           << (i < ids.getRank() ? "the ids'" : "the table's features");
  return success();
}

// ---- KV caches ---------------------------------------------------------------------------

/// The checks cache_view and paged_cache_view share: `store` (B or pages, Hkv, rows, Dh),
/// fresh (B, Hkv, n, Dh), lengths (B), result (B, Hkv, rowsTotal + n, Dh).
static LogicalResult verifyCacheView(Operation *op, Value store, Value lengths, Value fresh,
                                     Value result, int64_t rowsTotal) {
  auto s = rt(store), f = rt(fresh), l = rt(lengths), o = rt(result);
  if (s.getRank() != 4 || f.getRank() != 4 || o.getRank() != 4)
    return op->emitOpError("cache, new rows and result must have 4 dims");
  if (!compatible(s.getDimSize(1), f.getDimSize(1)) ||
      !compatible(s.getDimSize(3), f.getDimSize(3)))
    return op->emitOpError("cache and new rows must share kv heads and head dim");
  if (l.getRank() != 1 || !compatible(l.getDimSize(0), f.getDimSize(0)))
    return op->emitOpError("lengths must be (B)");
  int64_t n = f.getDimSize(2);
  int64_t total = ShapedType::isDynamic(rowsTotal) || ShapedType::isDynamic(n)
                      ? ShapedType::kDynamic
                      : rowsTotal + n;
  if (!compatible(o.getDimSize(0), f.getDimSize(0)) ||
      !compatible(o.getDimSize(1), f.getDimSize(1)) || !compatible(o.getDimSize(2), total) ||
      !compatible(o.getDimSize(3), f.getDimSize(3)))
    return op->emitOpError("result must be (B, Hkv, cache rows + new rows, Dh)");
  return success();
}

LogicalResult CacheViewOp::verify() {
  if (!compatible(rt(getPast()).getDimSize(0), rt(getFresh()).getDimSize(0)))
    return emitOpError("cache and new rows must share the batch dim");
  return verifyCacheView(*this, getPast(), getLengths(), getFresh(), getResult(),
                         rt(getPast()).getDimSize(2));
}

LogicalResult PagedCacheViewOp::verify() {
  auto table = rt(getTable());
  if (table.getRank() != 2 || !compatible(table.getDimSize(0), rt(getFresh()).getDimSize(0)))
    return emitOpError("table must be (B, pages per sequence)");
  int64_t m = table.getDimSize(1), page = rt(getPool()).getDimSize(2);
  int64_t rows =
      ShapedType::isDynamic(m) || ShapedType::isDynamic(page) ? ShapedType::kDynamic : m * page;
  return verifyCacheView(*this, getPool(), getLengths(), getFresh(), getResult(), rows);
}

// ---- mods and attention ------------------------------------------------------------------

/// Printed names of a mod region's block arguments: score, b, h, qi, kv, len_q, len_kv,
/// then each capture by the graph's name for it (the function argument's qkv.name) or
/// cap0, cap1, ...
static void nameModArguments(Region &region, bool withScore, ValueRange captures,
                             OpAsmSetValueNameFn setName) {
  if (region.empty())
    return;
  Block &block = region.front();
  static const char *lead[] = {"b", "h", "qi", "kv", "len_q", "len_kv"};
  unsigned i = 0;
  if (withScore && block.getNumArguments() > 0)
    setName(block.getArgument(i++), "score");
  for (const char *n : lead)
    if (i < block.getNumArguments())
      setName(block.getArgument(i++), n);
  for (auto [k, c] : llvm::enumerate(captures)) {
    if (i >= block.getNumArguments())
      return;
    std::string name = "cap" + std::to_string(k);
    if (auto arg = dyn_cast<BlockArgument>(c))
      if (auto fn = dyn_cast<FunctionOpInterface>(arg.getOwner()->getParentOp()))
        if (auto attr = fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), "qkv.name"))
          name = attr.getValue().str();
    setName(block.getArgument(i++), name);
  }
}

void MaskOp::getAsmBlockArgumentNames(Region &region, OpAsmSetValueNameFn setName) {
  nameModArguments(region, false, getCaptures(), setName);
}

void ScoreModOp::getAsmBlockArgumentNames(Region &region, OpAsmSetValueNameFn setName) {
  nameModArguments(region, true, getCaptures(), setName);
}

void AttentionOp::getAsmBlockArgumentNames(Region &region, OpAsmSetValueNameFn setName) {
  nameModArguments(region, &region == &getScore(), getCaptures(), setName);
}

static Type elementType(Value v) { return rt(v).getElementType(); }

LogicalResult MaskOp::verifyRegions() {
  int64_t r = rt(getScores()).getRank();
  if (r < 2 || r > 4)
    return emitOpError("scores must have 2, 3 or 4 dims");
  if (failed(sameShape(*this, rt(getScores()), rt(getResult()), "result")))
    return failure();
  return verifyModRegion(*this, getBody(), false, {}, getCaptures(), "mask");
}

LogicalResult ScoreModOp::verifyRegions() {
  int64_t r = rt(getScores()).getRank();
  if (r < 2 || r > 4)
    return emitOpError("scores must have 2, 3 or 4 dims");
  if (failed(sameShape(*this, rt(getScores()), rt(getResult()), "result")))
    return failure();
  return verifyModRegion(*this, getBody(), true, elementType(getScores()), getCaptures(),
                         "score_mod");
}

static LogicalResult verifyAttentionShapes(Operation *op, Value qv, Value kv, Value vv, Value out) {
  auto q = rt(qv), k = rt(kv), v = rt(vv), o = rt(out);
  int64_t r = q.getRank();
  if (r < 2 || r > 4 || k.getRank() != r || v.getRank() != r || o.getRank() != r)
    return op->emitOpError("q, k, v and the result must all have rank 2, 3 or 4");
  if (!compatible(q.getDimSize(r - 1), k.getDimSize(r - 1)))
    return op->emitOpError("q and k must share the head dim");
  if (!compatible(k.getDimSize(r - 2), v.getDimSize(r - 2)))
    return op->emitOpError("k and v must share the sequence dim");
  if (r == 4 && (!compatible(q.getDimSize(0), k.getDimSize(0)) ||
                 !compatible(q.getDimSize(0), v.getDimSize(0))))
    return op->emitOpError("q, k and v must share the batch dim");
  if (r >= 3) {
    int64_t hq = q.getDimSize(r - 3), hk = k.getDimSize(r - 3);
    if (!compatible(hk, v.getDimSize(r - 3)))
      return op->emitOpError("k and v must have the same heads");
    if (hq == 0 || hk == 0)
      return op->emitOpError("query and kv heads must not be 0");
    if (hq != hk && (ShapedType::isDynamic(hq) || ShapedType::isDynamic(hk) || hq % hk))
      return op->emitOpError("query heads must be a static multiple of kv heads");
  }
  if (!compatible(o.getDimSize(r - 2), q.getDimSize(r - 2)) ||
      !compatible(o.getDimSize(r - 1), v.getDimSize(r - 1)))
    return op->emitOpError("result must be (..., L, Dv)");
  return success();
}

LogicalResult AttentionOp::verify() {
  if (failed(verifyAttentionShapes(*this, getQ(), getK(), getV(), getResult())))
    return failure();
  if (!getLse())
    return success();
  auto q = cast<RankedTensorType>(getQ().getType());
  auto lse = cast<RankedTensorType>(getLse().getType());
  if (lse.getElementType() != elementType(getResult()) || lse.getRank() != q.getRank() - 1)
    return emitOpError("lse must be (..., Hq, L) of the result's element type");
  for (int64_t d = 0; d < lse.getRank(); ++d)
    if (!compatible(lse.getDimSize(d), q.getDimSize(d)))
      return emitOpError("lse must be (..., Hq, L): dim ") << d << " differs from q's";
  return success();
}

LogicalResult MergeAttentionOp::verify() {
  auto o = cast<RankedTensorType>(getOa().getType());
  auto l = cast<RankedTensorType>(getLa().getType());
  if (l.getRank() != o.getRank() - 1 || o.getShape().drop_back() != l.getShape())
    return emitOpError("the log-sum-exps must be the outputs' dims without the last");
  return success();
}

LogicalResult AttentionOp::verifyRegions() {
  if (failed(verifyModRegion(*this, getScore(), true, elementType(getQ()), getCaptures(), "score")))
    return failure();
  return verifyModRegion(*this, getMask(), false, {}, getCaptures(), "mask");
}

LogicalResult LinearAttentionOp::verify() {
  if (getFeatureMap() != "elu_plus_one" && getFeatureMap() != "relu")
    return emitOpError("feature_map must be \"elu_plus_one\" or \"relu\"");
  return verifyAttentionShapes(*this, getQ(), getK(), getV(), getResult());
}
