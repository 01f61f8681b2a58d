#include "KernelBuilder.h"

using namespace mlir;

namespace qkv::ir {

Value KernelBuilder::fconst(Type t, double v) {
  if (auto vt = dyn_cast<VectorType>(t))
    return arith::ConstantOp::create(
        b_, vt, DenseElementsAttr::get(vt, b_.getFloatAttr(vt.getElementType(), v)));
  return arith::ConstantOp::create(b_, b_.getFloatAttr(t, v));
}

Value KernelBuilder::splat(Value scalar, Type t) {
  if (!isa<VectorType>(t) || isa<VectorType>(scalar.getType()))
    return scalar;
  return vector::BroadcastOp::create(b_, t, scalar);
}

Value KernelBuilder::laneIds(Value base, Value last, int64_t lanes) {
  auto vt = VectorType::get({lanes}, b_.getIndexType());
  Value step = vector::StepOp::create(b_, vt);
  Value ids = arith::AddIOp::create(b_, step, splat(base, vt));
  return arith::MinSIOp::create(b_, ids, splat(last, vt));
}

Value KernelBuilder::vload(VectorType t, Value mem, ValueRange at, Value mask) {
  if (!mask)
    return vload(t, mem, at);
  return vector::MaskedLoadOp::create(b_, t, mem, at, mask, fconst(t, 0.0));
}

void KernelBuilder::vstore(Value v, Value mem, ValueRange at, Value mask) {
  if (!mask)
    return vstore(v, mem, at);
  vector::MaskedStoreOp::create(b_, mem, at, mask, v);
}

Value KernelBuilder::gather(VectorType t, Value mem, ValueRange at, Value offsets, Value mask) {
  return vector::GatherOp::create(b_, t, mem, at, offsets, mask, fconst(t, 0.0));
}

void KernelBuilder::scatter(Value v, Value mem, ValueRange at, Value offsets, Value mask) {
  vector::ScatterOp::create(b_, Type(), mem, at, offsets, mask, v);
}

Value KernelBuilder::firstLanes(Value n, int64_t lanes) {
  auto mt = VectorType::get({lanes}, b_.getI1Type());
  return vector::CreateMaskOp::create(b_, mt, ValueRange{n});
}

Value KernelBuilder::name(Value v, llvm::StringRef name) {
  auto loc = NameLoc::get(b_.getStringAttr(name));
  if (auto arg = dyn_cast<BlockArgument>(v))
    arg.setLoc(loc);
  else
    v.getDefiningOp()->setLoc(loc);
  return v;
}

void KernelBuilder::forLoop(Value lb, Value ub, Value step, const Body &body) {
  scf::ForOp::create(b_, lb, ub, step, ValueRange{},
                     [&](OpBuilder &nb, Location l, Value iv, ValueRange) {
                       ImplicitLocOpBuilder ib(l, nb);
                       KernelBuilder kb(ib);
                       body(kb, iv);
                       scf::YieldOp::create(ib);
                     });
}

llvm::SmallVector<Value> KernelBuilder::forLoop(Value lb, Value ub, Value step, ValueRange init,
                                                const CarriedBody &body) {
  auto loop = scf::ForOp::create(b_, lb, ub, step, init,
                                 [&](OpBuilder &nb, Location l, Value iv, ValueRange args) {
                                   ImplicitLocOpBuilder ib(l, nb);
                                   KernelBuilder kb(ib);
                                   scf::YieldOp::create(ib, body(kb, iv, args));
                                 });
  return llvm::SmallVector<Value>(loop.getResults());
}

void KernelBuilder::ifThen(Value cond, const std::function<void(KernelBuilder &)> &then,
                           const std::function<void(KernelBuilder &)> &otherwise) {
  auto wrap = [](const std::function<void(KernelBuilder &)> &f) {
    return [&f](OpBuilder &nb, Location l) {
      ImplicitLocOpBuilder ib(l, nb);
      KernelBuilder kb(ib);
      f(kb);
      scf::YieldOp::create(ib);
    };
  };
  if (otherwise)
    scf::IfOp::create(b_, cond, wrap(then), wrap(otherwise));
  else
    scf::IfOp::create(b_, cond, wrap(then));
}

void KernelBuilder::parallel(ValueRange ubs,
                             const std::function<void(KernelBuilder &, ValueRange)> &body) {
  SmallVector<Value> lbs(ubs.size(), idx(0)), steps(ubs.size(), idx(1));
  scf::ParallelOp::create(b_, lbs, ubs, steps, [&](OpBuilder &nb, Location l, ValueRange ivs) {
    ImplicitLocOpBuilder ib(l, nb);
    KernelBuilder kb(ib);
    body(kb, ivs);
  });
}

Value KernelBuilder::stackBuffer(Type elem, llvm::ArrayRef<int64_t> shape, ValueRange dynSizes) {
  auto t = MemRefType::get(shape, elem);
  return memref::AllocaOp::create(b_, t, dynSizes, ValueRange{}, b_.getI64IntegerAttr(64));
}

} // namespace qkv::ir
