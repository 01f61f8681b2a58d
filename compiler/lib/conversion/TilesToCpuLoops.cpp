// qkv-tiles-to-cpu-loops: the CUDA pipeline's tiled IR on the CPU. A block forall becomes an
// scf.parallel (OpenMP tasks), a thread or warp forall sequential scf.for loops: a block's
// threads (warps) run one after the other, which is what the barriers after each forall
// allow. A warp's body is warp-level code (whole-tile vector ops), run once per warp. A
// thread's own static allocas move to the block's body: the threads reuse them in turn.
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"

#include "qkv/compiler/transforms/Passes.h"

namespace qkv::ir {
#define GEN_PASS_DEF_TILESTOCPULOOPS
#include "qkv/compiler/transforms/Passes.h.inc"
} // namespace qkv::ir

using namespace mlir;

namespace {

/// A thread's own static allocas, moved from the loop its forall became to the start of
/// the block's body: the threads then reuse one buffer, one after the other, instead of
/// the stack growing by a buffer per thread and key tile (an alloca_scope in the loop is
/// not an option: its lowering splits the scf.for body into blocks). A GPU thread's
/// buffer starts undefined, so a buffer a thread before left is one it may start with.
void hoistAllocas(RewriterBase &rw, scf::ForOp loop, Block *blockBody) {
  SmallVector<memref::AllocaOp> allocas;
  loop.getBody()->walk([&](memref::AllocaOp a) {
    if (a->getNumOperands() == 0)
      allocas.push_back(a);
  });
  for (memref::AllocaOp a : allocas) {
    if (blockBody)
      rw.moveOpBefore(a, blockBody, blockBody->begin());
    else
      rw.moveOpBefore(a, loop);
  }
}

template <class MappingAttr> bool mappedTo(scf::ForallOp op) {
  std::optional<ArrayAttr> mapping = op.getMapping();
  return mapping && !mapping->empty() && isa<MappingAttr>((*mapping)[0]);
}

struct TilesToCpuLoopsPass : qkv::ir::impl::TilesToCpuLoopsBase<TilesToCpuLoopsPass> {
  void runOnOperation() override {
    IRRewriter rw(&getContext());
    SmallVector<scf::ForallOp> loops;
    getOperation().walk([&](scf::ForallOp op) { loops.push_back(op); }); // inner ones first
    for (scf::ForallOp op : loops) {
      rw.setInsertionPoint(op);
      SmallVector<Operation *> loops;
      LogicalResult done = mappedTo<gpu::GPUThreadMappingAttr>(op) ||
                                   mappedTo<gpu::GPUWarpMappingAttr>(op)
                               ? scf::forallToForLoop(rw, op, &loops)
                           : mappedTo<gpu::GPUBlockMappingAttr>(op)
                               ? scf::forallToParallelLoop(rw, op)
                               : success();
      if (succeeded(done) && !loops.empty()) {
        auto block = loops.front()->getParentOfType<scf::ForallOp>();
        hoistAllocas(rw, cast<scf::ForOp>(loops.front()), block ? block.getBody() : nullptr);
      }
      if (failed(done)) {
        op.emitError("qkv-tiles-to-cpu-loops: cannot lower this scf.forall");
        return signalPassFailure();
      }
    }
  }
};

} // namespace
