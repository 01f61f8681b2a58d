// qkv-tiles-to-cpu-loops: the CUDA pipeline's tiled IR on the CPU. A block forall becomes an
// scf.parallel (OpenMP tasks), a thread forall sequential scf.for loops: a block's threads
// run one after the other, which is what the barriers after each thread forall allow.
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"

#include "qkv/compiler/transforms/Passes.h"

namespace qkv::ir {
#define GEN_PASS_DEF_TILESTOCPULOOPS
#include "qkv/compiler/transforms/Passes.h.inc"
} // namespace qkv::ir

using namespace mlir;

namespace {

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
      LogicalResult done = mappedTo<gpu::GPUThreadMappingAttr>(op) ? scf::forallToForLoop(rw, op)
                           : mappedTo<gpu::GPUBlockMappingAttr>(op)
                               ? scf::forallToParallelLoop(rw, op)
                               : success();
      if (failed(done)) {
        op.emitError("qkv-tiles-to-cpu-loops: cannot lower this scf.forall");
        return signalPassFailure();
      }
    }
  }
};

} // namespace
