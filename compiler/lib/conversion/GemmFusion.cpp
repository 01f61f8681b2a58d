#include "GemmFusion.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Dominance.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;

namespace qkv::ir {

namespace {

/// The op before `op` that writes `c`, with nothing but ops free of memory effects (views
/// such as the collapse of an operand, index math) between them, or null.
Operation *writerJustBefore(Operation *op, Value c) {
  for (Operation *p = op->getPrevNode(); p; p = p->getPrevNode()) {
    if (auto l = dyn_cast<linalg::LinalgOp>(p))
      return l.hasPureBufferSemantics() && l.getNumDpsInits() == 1 && l.getDpsInits()[0] == c ? p
                                                                                             : nullptr;
    if (!isMemoryEffectFree(p))
      return nullptr;
  }
  return nullptr;
}

/// The 1-D buffer that `op` broadcasts along the rows of its output (out[..., j] = v[j],
/// or v[j] widened: a bf16 bias into f32 C), or null.
Value broadcastRow(linalg::GenericOp op) {
  if (op.getNumDpsInputs() != 1 || op.getNumReductionLoops() != 0)
    return nullptr;
  Block &body = op.getRegion().front();
  Value yielded = body.getTerminator()->getOperand(0);
  if (auto ext = yielded.getDefiningOp<arith::ExtFOp>())
    yielded = ext.getIn();
  if (yielded != body.getArgument(0))
    return nullptr;
  AffineMap in = op.getIndexingMapsArray()[0], out = op.getIndexingMapsArray()[1];
  unsigned n = op.getNumLoops();
  if (!out.isIdentity() || in.getNumResults() != 1 || in.getResult(0) != getAffineDimExpr(n - 1, op.getContext()))
    return nullptr;
  Value v = op.getDpsInputs()[0];
  auto mt = cast<MemRefType>(v.getType());
  SmallVector<int64_t> strides;
  int64_t offset;
  if (mt.getRank() != 1 || failed(mt.getStridesAndOffset(strides, offset)) || strides[0] != 1)
    return nullptr;
  return v;
}

} // namespace

bool onlyAllocates(Operation *op) {
  auto iface = dyn_cast<MemoryEffectOpInterface>(op);
  if (!iface)
    return isMemoryEffectFree(op);
  SmallVector<MemoryEffects::EffectInstance> effects;
  iface.getEffects(effects);
  return llvm::all_of(effects, [](auto &e) { return isa<MemoryEffects::Allocate>(e.getEffect()); });
}

linalg::GenericOp gemmConsumer(Operation *op, Value c) {
  for (Operation *n = op->getNextNode(); n; n = n->getNextNode()) {
    auto g = dyn_cast<linalg::GenericOp>(n);
    if (!g)
      if (onlyAllocates(n))
        continue;
    if (!g || !llvm::is_contained(g.getDpsInputs(), c))
      return nullptr;
    return g;
  }
  return nullptr;
}

GemmStart gemmStartOf(Operation *op, Value c) {
  GemmStart s;
  Operation *w = writerJustBefore(op, c);
  if (auto fill = dyn_cast_or_null<linalg::FillOp>(w)) {
    s.kind = GemmStart::Kind::Fill;
    s.value = fill.getDpsInputs()[0];
    s.op = fill;
  } else if (auto g = dyn_cast_or_null<linalg::GenericOp>(w); g && broadcastRow(g)) {
    s.kind = GemmStart::Kind::Bias;
    s.value = broadcastRow(g);
    s.op = g;
  }
  return s;
}

/// Whether `g` can take C's value per element where it writes its output: it reads C
/// with the identity map, and its output, when it reads it (a generic bufferized in place
/// on C, or on another operand: SwiGLU written over its gate), with the identity map too,
/// not through the output's own argument; and the matmul does not read the output.
bool epilogueFits(Operation *op, linalg::GenericOp g, const VectorizedGeneric &v, Value c,
                  Value out) {
  auto ct = cast<MemRefType>(c.getType()), ot = cast<MemRefType>(out.getType());
  if (v.reduction() || v.loops() != ct.getRank() || ot.getShape() != ct.getShape() ||
      ot.getLayout() != ct.getLayout() ||
      !g.getRegion().front().getArguments().back().use_empty())
    return false;
  for (OpOperand *in : g.getDpsInputOperands())
    if ((in->get() == c || in->get() == out) && !g.getMatchingIndexingMap(in).isIdentity())
      return false;
  return !llvm::any_of(op->getOperands(), [&](Value x) { return x == out && x != c; });
}

std::optional<GemmEpilogue> takeGemmEpilogue(Operation *op, Value c, const GemmStart &start,
                                             int64_t vectorBits) {
  linalg::GenericOp g = gemmConsumer(op, c);
  if (!g)
    return std::nullopt;
  std::optional<VectorizedGeneric> v = VectorizedGeneric::analyse(g, vectorBits);
  Value out = g.getDpsInits()[0];
  // An output of another element type (a bf16 graph's rounding of the product), or one
  // that holds another of the generic's operands (SwiGLU in place on its gate): C stays,
  // and each task writes its block's output from it right after the block.
  bool readsOut = llvm::any_of(g.getDpsInputs(), [&](Value x) { return x == out && x != c; });
  bool keepC = readsOut || getElementTypeOrSelf(out.getType()) != getElementTypeOrSelf(c.getType());
  // C is the output already (the generic bufferized in place on it: other ops may use the
  // buffer before the start or after the generic, nothing between them does), or a
  // buffer of its own that only the start, the matmul and the generic use.
  bool inPlace = out == c;
  auto alloc = c.getDefiningOp<memref::AllocOp>();
  auto known = [&](OpOperand &u) {
    Operation *user = u.getOwner();
    return user == op || user == start.op || user == g || isa<memref::DeallocOp>(user);
  };
  if (!v || !epilogueFits(op, g, *v, c, out) ||
      (!inPlace && (!alloc || !llvm::all_of(c.getUses(), known))) || (keepC && inPlace))
    return std::nullopt;
  // Everything the epilogue reads must exist where the GEMM starts; the output's
  // allocation moves there when it can.
  Operation *first = start.op ? start.op : op;
  DominanceInfo dom(op->getParentOp());
  auto outAlloc = out.getDefiningOp<memref::AllocOp>();
  if (outAlloc && !dom.properlyDominates(out, first)) {
    if (!llvm::all_of(outAlloc->getOperands(), [&](Value x) { return dom.properlyDominates(x, first); }))
      return std::nullopt;
    outAlloc->moveBefore(first);
  }
  for (Value x : g->getOperands())
    if (x != c && !dom.properlyDominates(x, first))
      return std::nullopt;
  if (keepC)
    return GemmEpilogue{*v, SmallVector<Value>(g->getOperands()), c};
  if (!inPlace) {
    // The start, the matmul and the epilogue write the output; C goes.
    for (Operation *user : {first, op, g.getOperation()})
      user->replaceUsesOfWith(c, out);
    for (Operation *user : llvm::make_early_inc_range(c.getUsers()))
      user->erase();
    alloc->erase();
  }
  return GemmEpilogue{*v, SmallVector<Value>(g->getOperands()), out};
}

} // namespace qkv::ir
