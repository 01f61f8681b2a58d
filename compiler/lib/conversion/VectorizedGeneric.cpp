#include "VectorizedGeneric.h"

#include <limits>

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;

namespace qkv::ir {

namespace {

bool fail(std::string *why, const std::string &what) {
  if (why)
    *why = what;
  return false;
}

/// The reduction kind of a combining op, if it is one this handles.
std::optional<vector::CombiningKind> kindOf(Operation *op) {
  if (isa<arith::AddFOp>(op))
    return vector::CombiningKind::ADD;
  if (isa<arith::MulFOp>(op))
    return vector::CombiningKind::MUL;
  if (isa<arith::MaximumFOp>(op))
    return vector::CombiningKind::MAXIMUMF;
  if (isa<arith::MinimumFOp>(op))
    return vector::CombiningKind::MINIMUMF;
  if (isa<arith::MaxNumFOp>(op))
    return vector::CombiningKind::MAXNUMF;
  if (isa<arith::MinNumFOp>(op))
    return vector::CombiningKind::MINNUMF;
  return std::nullopt;
}

/// The value a reduction of `kind` starts from.
double neutral(vector::CombiningKind kind) {
  switch (kind) {
  case vector::CombiningKind::MUL: return 1.0;
  case vector::CombiningKind::MAXIMUMF:
  case vector::CombiningKind::MAXNUMF: return -std::numeric_limits<double>::infinity();
  case vector::CombiningKind::MINIMUMF:
  case vector::CombiningKind::MINNUMF: return std::numeric_limits<double>::infinity();
  default: return 0.0;
  }
}

/// Whether the memref's last dimension has unit stride.
bool unitInner(Value v) {
  auto mt = dyn_cast<MemRefType>(v.getType());
  if (!mt || mt.getRank() == 0)
    return false;
  SmallVector<int64_t> strides;
  int64_t offset;
  return succeeded(mt.getStridesAndOffset(strides, offset)) && strides.back() == 1;
}

/// Whether `map` is a projected permutation that, if it takes the innermost loop dim
/// `inner`, takes it last (the outer dims may come in any order: a transpose of rows).
bool innerLast(AffineMap map, unsigned inner) {
  if (!map.isProjectedPermutation())
    return false;
  for (unsigned i = 0; i < map.getNumResults(); ++i)
    if (cast<AffineDimExpr>(map.getResult(i)).getPosition() == inner && i + 1 != map.getNumResults())
      return false;
  return true;
}

bool usesDim(AffineMap map, unsigned d) {
  return llvm::any_of(map.getResults(),
                      [&](AffineExpr e) { return cast<AffineDimExpr>(e).getPosition() == d; });
}

/// Math ops whose vector forms LLVM computes as vector code: exact ones for any float
/// type; for f32 also those qkv-vectorize-elementwise replaces by MLIR's polynomial
/// approximations (the others, such as f64 erf, would become one libm call per lane).
bool vectorMath(Operation &o) {
  if (isa<math::SqrtOp, math::RsqrtOp, math::FmaOp, math::AbsFOp, math::CopySignOp, math::FloorOp,
          math::CeilOp, math::RoundEvenOp, math::RoundOp, math::TruncOp>(o))
    return true;
  bool f32 = llvm::all_of(o.getOperandTypes(), [](Type t) { return t.isF32(); });
  return f32 && isa<math::ExpOp, math::Exp2Op, math::ExpM1Op, math::LogOp, math::Log2Op,
                    math::Log1pOp, math::TanhOp, math::ErfOp, math::SinOp, math::CosOp,
                    math::AtanOp>(o);
}

bool checkBody(linalg::GenericOp op, std::string *why, int64_t &widest) {
  for (Operation &o : op.getRegion().front().without_terminator()) {
    bool math = isa<math::MathDialect>(o.getDialect());
    if (o.getNumRegions() || (!isa<arith::ConstantOp>(o) && !o.hasTrait<OpTrait::Elementwise>()) ||
        (math && !vectorMath(o)))
      return fail(why, "the body has '" + o.getName().getStringRef().str() + "'");
    for (Type t : llvm::concat<Type>(o.getOperandTypes(), o.getResultTypes())) {
      if (!t.isIntOrFloat())
        return fail(why, "the body has a value that is not an integer or float");
      widest = std::max<int64_t>(widest, t.getIntOrFloatBitWidth());
    }
  }
  return true;
}

} // namespace

std::optional<VectorizedGeneric> VectorizedGeneric::analyse(linalg::GenericOp op, int64_t vectorBits,
                                                            std::string *why) {
  VectorizedGeneric g;
  g.op_ = op;
  g.loops_ = op.getNumLoops();
  if (!op.hasPureBufferSemantics() || op.getNumDpsInits() != 1 || g.loops_ == 0) {
    fail(why, "not one output on buffers");
    return std::nullopt;
  }
  auto iters = op.getIteratorTypesArray();
  for (unsigned d = 0; d + 1 < g.loops_; ++d)
    if (iters[d] != utils::IteratorType::parallel) {
      fail(why, "a reduction before the innermost loop");
      return std::nullopt;
    }
  bool reduces = iters.back() == utils::IteratorType::reduction;
  unsigned inner = g.loops_ - 1;
  for (OpOperand &o : op->getOpOperands()) {
    AffineMap map = op.getMatchingIndexingMap(&o);
    bool isOut = op.isDpsInit(&o);
    // The output is indexed by the loops in order, all of them but a reduced last one.
    bool identity = map.getNumResults() == g.loops_ - (reduces ? 1 : 0) &&
                    llvm::all_of(llvm::enumerate(map.getResults()), [](auto e) {
                      return cast<AffineDimExpr>(e.value()).getPosition() == e.index();
                    });
    if (!innerLast(map, inner) || (isOut && !identity) || (usesDim(map, inner) && !unitInner(o.get()))) {
      fail(why, "an operand's map or layout");
      return std::nullopt;
    }
  }
  if (reduces) {
    Block &body = op.getRegion().front();
    BlockArgument out = body.getArguments().back();
    Operation *c = body.getTerminator()->getOperand(0).getDefiningOp();
    if (!c || !out.hasOneUse() || *out.getUsers().begin() != c || !kindOf(c) ||
        !isa<FloatType>(out.getType())) {
      fail(why, "the reduction's body is not output <combine> value");
      return std::nullopt;
    }
    g.combiner_ = c;
    g.kind_ = *kindOf(c);
  }
  int64_t widest = 8;
  for (Value v : op->getOperands())
    widest = std::max<int64_t>(widest, getElementTypeOrSelf(v.getType()).getIntOrFloatBitWidth());
  if (!checkBody(op, why, widest))
    return std::nullopt;
  g.lanes_ = std::max<int64_t>(1, vectorBits / widest);
  return g;
}

Value VectorizedGeneric::emitBody(KernelBuilder &kb, IRMapping &map) const {
  ImplicitLocOpBuilder &b = kb.builder();
  Block &body = op_.getRegion().front();
  auto vec = [&](Type t) { return VectorType::get({lanes_}, t); };
  for (Operation &o : body.without_terminator()) {
    if (auto c = dyn_cast<arith::ConstantOp>(o)) {
      Value scalar = b.clone(*c)->getResult(0);
      map.map(c.getResult(), kb.splat(scalar, vec(scalar.getType())));
      continue;
    }
    OperationState st(o.getLoc(), o.getName());
    for (Value v : o.getOperands()) {
      if (!map.contains(v)) // defined outside the body: the same for every lane
        map.map(v, kb.splat(v, vec(v.getType())));
      st.addOperands(map.lookup(v));
    }
    st.addAttributes(o.getAttrs());
    for (Type t : o.getResultTypes())
      st.addTypes(vec(t));
    Operation *n = b.create(st);
    map.map(o.getResults(), n->getResults());
  }
  Value yielded = body.getTerminator()->getOperand(0);
  if (!map.contains(yielded)) // a value from outside the body (a fill)
    return kb.splat(yielded, vec(yielded.getType()));
  return map.lookup(yielded);
}

void VectorizedGeneric::emitRow(KernelBuilder &kb, ValueRange outer, Value j0, Value j1,
                                ValueRange operands) const {
  Block &body = op_.getRegion().front();
  unsigned inner = loops_ - 1;
  SmallVector<OpOperand *> opnds;
  for (OpOperand &o : op_->getOpOperands())
    opnds.push_back(&o);
  // The indices of operand k at innermost index j (null: the operand does not use it).
  auto indices = [&](unsigned k, Value j) {
    SmallVector<Value> idx;
    for (AffineExpr e : op_.getMatchingIndexingMap(opnds[k]).getResults()) {
      unsigned d = cast<AffineDimExpr>(e).getPosition();
      idx.push_back(d == inner ? j : outer[d]);
    }
    return idx;
  };
  unsigned outIdx = opnds.size() - 1;
  // Operands that do not vary along the innermost loop: one load, the same for all lanes.
  IRMapping fixed;
  for (unsigned k = 0; k < opnds.size(); ++k) {
    if (usesDim(op_.getMatchingIndexingMap(opnds[k]), inner) || body.getArgument(k).use_empty() ||
        (k == outIdx && reduction()))
      continue;
    Value s = kb.load(operands[k], indices(k, j0));
    fixed.map(body.getArgument(k), kb.splat(s, VectorType::get({lanes_}, s.getType())));
  }
  // One step at innermost index j: the vectors of the varying operands, then the body.
  auto step = [&](KernelBuilder &in, Value j, Value mask, Value acc) {
    IRMapping map = fixed;
    for (unsigned k = 0; k < opnds.size(); ++k) {
      if (map.contains(body.getArgument(k)) || body.getArgument(k).use_empty() ||
          (k == outIdx && reduction()))
        continue;
      auto vt = VectorType::get({lanes_}, getElementTypeOrSelf(operands[k].getType()));
      map.map(body.getArgument(k), in.vload(vt, operands[k], indices(k, j), mask));
    }
    if (reduction())
      map.map(body.getArguments().back(), acc);
    return emitBody(in, map);
  };
  Value n = kb.sub(j1, j0);
  Value main = kb.add(j0, kb.mul(kb.divu(n, kb.idx(lanes_)), lanes_));
  Value rest = kb.sub(j1, main);
  if (reduction())
    return emitReduction(kb, step, j0, main, rest, operands[outIdx], indices(outIdx, j0));
  Value hasTail = kb.cmp(arith::CmpIPredicate::sgt, rest, kb.idx(0));
  kb.forLoop(j0, main, lanes_, [&](KernelBuilder &in, Value j) {
    in.vstore(step(in, j, nullptr, nullptr), operands[outIdx], indices(outIdx, j));
  });
  kb.ifThen(hasTail, [&](KernelBuilder &in) {
    Value mask = in.firstLanes(rest, lanes_);
    in.vstore(step(in, main, mask, nullptr), operands[outIdx], indices(outIdx, main), mask);
  });
}

void VectorizedGeneric::emitReduction(KernelBuilder &kb, Step step, Value j0, Value main,
                                      Value rest, Value out, ValueRange outAt) const {
  ImplicitLocOpBuilder &b = kb.builder();
  Block &body = op_.getRegion().front();
  Value partial = kb.cmp(arith::CmpIPredicate::sgt, rest, kb.idx(0));
  Type elem = body.getArguments().back().getType();
  VectorType vt = VectorType::get({lanes_}, elem);
  Value acc0 = kb.fconst(vt, neutral(kind_));
  Value acc = kb.forLoop(j0, main, kb.idx(lanes_), {acc0},
                         [&](KernelBuilder &in, Value j, ValueRange a) -> SmallVector<Value> {
                           return {step(in, j, nullptr, a[0])};
                         })[0];
  auto tail = scf::IfOp::create(
      b, partial,
      [&](OpBuilder &nb, Location l) {
        ImplicitLocOpBuilder ib(l, nb);
        KernelBuilder in(ib);
        Value mask = in.firstLanes(rest, lanes_);
        Value v = step(in, main, mask, acc);
        scf::YieldOp::create(ib, ValueRange{arith::SelectOp::create(ib, mask, v, acc)});
      },
      [&](OpBuilder &nb, Location l) { scf::YieldOp::create(nb, l, ValueRange{acc}); });
  Value total = vector::ReductionOp::create(b, kind_, tail.getResult(0));
  Value prior = kb.load(out, outAt);
  IRMapping last;
  last.map(body.getArguments().back(), prior);
  for (Value v : combiner_->getOperands())
    if (v != body.getArguments().back())
      last.map(v, total);
  kb.store(b.clone(*combiner_, last)->getResult(0), out, outAt);
}

} // namespace qkv::ir
