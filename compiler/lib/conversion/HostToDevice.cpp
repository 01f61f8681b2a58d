// qkv-host-to-device: the CUDA pipeline's host code touches no memory. After
// bufferization the graph function allocates its intermediate buffers, copies some, and
// may keep a loop nest with no parallel dim (a full reduction) outside every scf.parallel;
// on the GPU the buffers must be device memory and every loop a kernel. So: memref.alloc
// and dealloc become gpu.alloc and gpu.dealloc, memref.copy a parallel loop nest, and the
// remaining host loops a one-iteration scf.parallel each (a one-thread kernel).
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/PatternMatch.h"

#include "qkv/compiler/transforms/Passes.h"

namespace qkv::ir {
#define GEN_PASS_DEF_HOSTTODEVICE
#include "qkv/compiler/transforms/Passes.h.inc"
} // namespace qkv::ir

using namespace mlir;

namespace {

/// memref.copy -> scf.parallel over every element.
void copyToLoops(RewriterBase &rw, memref::CopyOp copy) {
  Location loc = copy.getLoc();
  rw.setInsertionPoint(copy);
  Value src = copy.getSource(), dst = copy.getTarget();
  auto t = cast<MemRefType>(src.getType());
  SmallVector<Value> lbs, ubs, steps;
  Value zero = arith::ConstantIndexOp::create(rw, loc, 0);
  Value one = arith::ConstantIndexOp::create(rw, loc, 1);
  for (int64_t d = 0; d < t.getRank(); ++d) {
    lbs.push_back(zero);
    ubs.push_back(memref::DimOp::create(rw, loc, src, d));
    steps.push_back(one);
  }
  if (t.getRank() == 0) { // one element: a one-iteration loop
    lbs.push_back(zero);
    ubs.push_back(one);
    steps.push_back(one);
  }
  scf::ParallelOp::create(rw, loc, lbs, ubs, steps, [&](OpBuilder &b, Location l, ValueRange iv) {
    ValueRange at = t.getRank() == 0 ? ValueRange{} : iv;
    memref::StoreOp::create(b, l, memref::LoadOp::create(b, l, src, at), dst, at);
  });
  rw.eraseOp(copy);
}

/// `op` in a one-iteration scf.parallel of its own.
void wrapInParallel(RewriterBase &rw, Operation *op) {
  Location loc = op->getLoc();
  rw.setInsertionPoint(op);
  Value zero = arith::ConstantIndexOp::create(rw, loc, 0);
  Value one = arith::ConstantIndexOp::create(rw, loc, 1);
  auto par = scf::ParallelOp::create(rw, loc, ValueRange{zero}, ValueRange{one}, ValueRange{one},
                                     [](OpBuilder &, Location, ValueRange) {});
  rw.moveOpBefore(op, par.getBody()->getTerminator());
}

/// Whether op (a top-level op of the function) reads or writes memory itself or inside.
bool touchesMemory(Operation *op) {
  bool touches = false;
  op->walk([&](Operation *inner) {
    if (isa<memref::LoadOp, memref::StoreOp, vector::LoadOp, vector::StoreOp,
            vector::TransferReadOp, vector::TransferWriteOp>(inner))
      touches = true;
  });
  return touches;
}

struct HostToDevicePass : qkv::ir::impl::HostToDeviceBase<HostToDevicePass> {
  void runOnOperation() override {
    IRRewriter rw(&getContext());
    func::FuncOp fn = getOperation();
    SmallVector<Operation *> ops;
    fn.walk<WalkOrder::PreOrder>([&](Operation *op) {
      if (isa<gpu::LaunchOp, scf::ParallelOp>(op))
        return WalkResult::skip(); // device code already
      if (isa<memref::AllocOp, memref::DeallocOp, memref::CopyOp>(op))
        ops.push_back(op);
      return WalkResult::advance();
    });
    for (Operation *op : ops) {
      rw.setInsertionPoint(op);
      if (auto a = dyn_cast<memref::AllocOp>(op))
        rw.replaceOpWithNewOp<gpu::AllocOp>(a, a.getType(), Type(), ValueRange{},
                                            a.getDynamicSizes(), a.getSymbolOperands(), false);
      else if (auto d = dyn_cast<memref::DeallocOp>(op))
        rw.replaceOpWithNewOp<gpu::DeallocOp>(d, TypeRange{}, ValueRange{}, d.getMemref());
      else
        copyToLoops(rw, cast<memref::CopyOp>(op));
    }
    // Only ops whose results nothing uses can move into a loop of their own (a store, a
    // loop that stores); a host op whose result is used stays, and lower_to then rejects
    // the host code's memory access after the gpu stage.
    SmallVector<Operation *> host;
    for (Operation &op : fn.getBody().front()) {
      if (isa<gpu::LaunchOp, scf::ParallelOp>(op) || !op.use_empty())
        continue;
      if ((op.getNumRegions() > 0 && touchesMemory(&op)) || isa<memref::StoreOp>(op))
        host.push_back(&op);
    }
    for (Operation *op : host)
      wrapInParallel(rw, op);
  }
};

} // namespace
