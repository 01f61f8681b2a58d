#include "ModVectorizer.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"

#include "qkv/compiler/ir/QkvDialect.h"

using namespace mlir;

namespace qkv::ir {

namespace {

bool isVector(Value v) { return isa<VectorType>(v.getType()); }

VectorType laneType(Type scalar, int64_t lanes) { return VectorType::get({lanes}, scalar); }

/// The capture `mem` (identity layout) as a 1-D memref, and the flat position of `idx`.
Value flatIndex(KernelBuilder &kb, Value mem, ArrayRef<Value> idx, int64_t lanes) {
  ImplicitLocOpBuilder &b = kb.builder();
  auto mt = cast<MemRefType>(mem.getType());
  VectorType vt = laneType(b.getIndexType(), lanes);
  Value flat = kb.splat(kb.idx(0), vt);
  Value stride = kb.idx(1);
  for (int64_t d = mt.getRank() - 1; d >= 0; --d) {
    Value term = arith::MulIOp::create(b, kb.splat(idx[d], vt), kb.splat(stride, vt));
    flat = arith::AddIOp::create(b, flat, term);
    if (d > 0)
      stride = kb.mul(stride, memref::DimOp::create(b, mem, d));
  }
  return flat;
}

Value gather(KernelBuilder &kb, Value mem, ArrayRef<Value> idx, int64_t lanes) {
  ImplicitLocOpBuilder &b = kb.builder();
  auto mt = cast<MemRefType>(mem.getType());
  Value flatIdx = flatIndex(kb, mem, idx, lanes);
  Value flatMem = mem;
  if (mt.getRank() != 1) {
    ReassociationIndices all;
    for (int64_t d = 0; d < mt.getRank(); ++d)
      all.push_back(d);
    flatMem = memref::CollapseShapeOp::create(b, mem, ArrayRef<ReassociationIndices>{all});
  }
  VectorType vt = laneType(mt.getElementType(), lanes);
  VectorType mt1 = laneType(b.getI1Type(), lanes);
  Value allTrue =
      arith::ConstantOp::create(b, mt1, DenseElementsAttr::get(mt1, b.getBoolAttr(true)));
  Value zero = arith::ConstantOp::create(b, vt, b.getZeroAttr(vt));
  return vector::GatherOp::create(b, vt, flatMem, ValueRange{kb.idx(0)}, flatIdx, allTrue, zero);
}

/// tensor.extract from a capture: a scalar load, or a gather when an index varies by lane.
Value emitExtract(KernelBuilder &kb, tensor::ExtractOp ex, IRMapping &map, int64_t lanes) {
  Value mem = map.lookup(ex.getTensor());
  SmallVector<Value> idx;
  bool varying = false;
  for (Value i : ex.getIndices()) {
    idx.push_back(map.lookupOrDefault(i));
    varying |= isVector(idx.back());
  }
  if (!varying)
    return kb.load(mem, idx);
  if (cast<MemRefType>(mem.getType()).getRank() == 0)
    return kb.load(mem, {});
  return gather(kb, mem, idx, lanes);
}

/// A checked compile's qkv.check: when its condition varies by lane, one branch on
/// "every lane in bounds", and behind it a loop over the lanes checking each (one copy
/// of the report in the code, not one per lane).
void emitCheck(KernelBuilder &kb, CheckOp check, IRMapping &map, int64_t lanes);

/// An op with a vector operand, lane by lane: for ops without a vector form.
void emitByLane(KernelBuilder &kb, Operation &op, IRMapping &map, int64_t lanes) {
  ImplicitLocOpBuilder &b = kb.builder();
  SmallVector<SmallVector<Value>> perResult(op.getNumResults());
  for (int64_t lane = 0; lane < lanes; ++lane) {
    IRMapping laneMap;
    for (Value v : op.getOperands()) {
      Value m = map.lookupOrDefault(v);
      laneMap.map(v, isVector(m) ? vector::ExtractOp::create(b, m, lane).getResult() : m);
    }
    Operation *c = b.clone(op, laneMap);
    for (unsigned r = 0; r < op.getNumResults(); ++r)
      perResult[r].push_back(c->getResult(r));
  }
  for (unsigned r = 0; r < op.getNumResults(); ++r)
    map.map(op.getResult(r), vector::FromElementsOp::create(
                                 b, laneType(op.getResult(r).getType(), lanes), perResult[r]));
}

/// An elementwise-mappable op (arith, math) on vectors: clone, splat its scalar operands,
/// widen its result types.
void emitVectorOp(KernelBuilder &kb, Operation &op, IRMapping &map, int64_t lanes) {
  ImplicitLocOpBuilder &b = kb.builder();
  Operation *c = b.clone(op, map);
  for (OpOperand &o : c->getOpOperands())
    if (!isVector(o.get()))
      o.set(kb.splat(o.get(), laneType(o.get().getType(), lanes)));
  // The splats were created after the clone: move the clone behind them.
  c->moveBefore(b.getInsertionBlock(), b.getInsertionPoint());
  for (OpResult r : c->getResults())
    r.setType(laneType(r.getType(), lanes));
}

void emitCheck(KernelBuilder &kb, CheckOp check, IRMapping &map, int64_t lanes) {
  ImplicitLocOpBuilder &b = kb.builder();
  Value ok = map.lookupOrDefault(check.getOk());
  bool varying = llvm::any_of(check->getOperands(),
                              [&](Value v) { return isVector(map.lookupOrDefault(v)); });
  if (!varying) {
    b.clone(*check, map);
    return;
  }
  if (!isVector(ok))
    ok = kb.splat(ok, laneType(b.getI1Type(), lanes));
  Value all = vector::ReductionOp::create(b, vector::CombiningKind::AND, ok);
  Value someOut = arith::XOrIOp::create(b, all, arith::ConstantOp::create(b, b.getBoolAttr(true)));
  kb.ifThen(someOut, [&](KernelBuilder &in) {
    in.forLoop(in.idx(0), in.idx(lanes), 1, [&](KernelBuilder &body, Value lane) {
      ImplicitLocOpBuilder &b = body.builder();
      IRMapping laneMap;
      for (Value v : check->getOperands()) {
        Value m = map.lookupOrDefault(v);
        laneMap.map(v, isVector(m) ? vector::ExtractOp::create(b, m, ArrayRef<OpFoldResult>{lane})
                                         .getResult()
                                   : m);
      }
      b.clone(*check, laneMap);
    });
  });
}

} // namespace

Value emitModRegion(KernelBuilder &kb, Region &region, ValueRange lead, ValueRange captures,
                    int64_t lanes, bool checksHold) {
  Block &block = region.front();
  IRMapping map;
  unsigned i = 0;
  for (Value v : lead)
    map.map(block.getArgument(i++), v);
  for (Value v : captures)
    map.map(block.getArgument(i++), v);
  // Where the caller proved every check passes, each check's condition is true: the
  // checks go, and the clamps and safe divisors that select on them fold away.
  DenseSet<Value> held;
  if (checksHold)
    region.walk([&](CheckOp check) {
      held.insert(check.getOk());
      map.map(check.getOk(),
              arith::ConstantOp::create(kb.builder(), kb.builder().getBoolAttr(true)).getResult());
    });
  for (Operation &op : block.without_terminator()) {
    if (checksHold && (isa<CheckOp>(op) ||
                       llvm::any_of(op.getResults(), [&](Value r) { return held.contains(r); })))
      continue;
    if (auto ex = dyn_cast<tensor::ExtractOp>(op)) {
      map.map(ex.getResult(), emitExtract(kb, ex, map, lanes));
      continue;
    }
    if (auto dim = dyn_cast<tensor::DimOp>(op)) { // of a capture, now a memref
      map.map(dim.getResult(), memref::DimOp::create(kb.builder(), map.lookup(dim.getSource()),
                                                     map.lookupOrDefault(dim.getIndex())));
      continue;
    }
    if (auto check = dyn_cast<CheckOp>(op)) {
      emitCheck(kb, check, map, lanes);
      continue;
    }
    bool varying =
        llvm::any_of(op.getOperands(), [&](Value v) { return isVector(map.lookupOrDefault(v)); });
    if (!varying)
      kb.builder().clone(op, map);
    else if (op.hasTrait<OpTrait::Elementwise>() && op.getNumRegions() == 0)
      emitVectorOp(kb, op, map, lanes);
    else
      emitByLane(kb, op, map, lanes);
  }
  return map.lookupOrDefault(cast<YieldOp>(block.getTerminator()).getValue());
}

} // namespace qkv::ir
