// The qkv dialect: the verifiers that the ops' shape rules do not cover (split_heads, the
// mod regions, attention's log-sum-exp result). Every other shape check is the ShapeRule
// trait's (ShapeRuleVerifier.cpp), which calls the op table's rule. Import builds
// well-typed IR from a verified Graph; the verifiers guard IR written by hand for qkv-opt
// and IR produced by passes.
#include "qkv/compiler/ir/QkvDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

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

// ---- split_heads: its head dim is the result's, which the op table has no attribute for --

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

/// The shapes are the ShapeRule trait's; the optional log-sum-exp result is checked here.
LogicalResult AttentionOp::verify() {
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

LogicalResult AttentionOp::verifyRegions() {
  if (failed(verifyModRegion(*this, getScore(), true, elementType(getQ()), getCaptures(), "score")))
    return failure();
  return verifyModRegion(*this, getMask(), false, {}, getCaptures(), "mask");
}
