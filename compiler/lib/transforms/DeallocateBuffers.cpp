// qkv-deallocate-buffers: frees the heap buffers bufferization made. In the CPU and CUDA
// pipelines every memref.alloc sits in its function's entry block (bufferized tensors of
// the graph's top-level ops, the attention's output) and no alias of it leaves the
// function (results are out-params): then a memref.dealloc before the return frees each
// one, which is where buffer-deallocation-pipeline puts them too, at a tenth of its
// compile time (it runs canonicalize three times over the whole module). A scratch buffer
// that the pass which made it already frees in the same block (the matmul lowering's
// packed B) is left as it is. Any other shape gets that upstream pipeline.
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Pass/PassManager.h"

#include "qkv/compiler/transforms/Passes.h"

namespace qkv::ir {
#define GEN_PASS_DEF_DEALLOCATEBUFFERS
#include "qkv/compiler/transforms/Passes.h.inc"
} // namespace qkv::ir

using namespace mlir;

namespace {

/// Whether `alloc`, or a memref made from it (a view, a cast), leaves its function: as an
/// operand of a terminator (returned, yielded out of a region) or of a call that returns
/// something (which could be it).
bool escapes(memref::AllocOp alloc) {
  SmallVector<Value> work = {alloc.getResult()};
  DenseSet<Value> seen;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (!seen.insert(v).second)
      continue;
    for (Operation *user : v.getUsers()) {
      if (user->hasTrait<OpTrait::IsTerminator>())
        return true;
      if (isa<CallOpInterface>(user) && user->getNumResults() > 0)
        return true;
      for (Value r : user->getResults())
        if (isa<BaseMemRefType>(r.getType()))
          work.push_back(r);
    }
  }
  return false;
}

/// The allocations to free at the end of their functions, or nullopt when the module has
/// one this pass does not handle (see the file comment).
/// Whether `dealloc` frees an allocation of its own block that nothing else frees.
bool freesOwnScratch(memref::DeallocOp dealloc) {
  auto alloc = dealloc.getMemref().getDefiningOp<memref::AllocOp>();
  if (!alloc || alloc->getBlock() != dealloc->getBlock())
    return false;
  return llvm::count_if(alloc->getUsers(), [](Operation *u) { return isa<memref::DeallocOp>(u); }) ==
         1;
}

std::optional<SmallVector<memref::AllocOp>> simpleAllocations(ModuleOp module) {
  SmallVector<memref::AllocOp> allocs;
  bool simple = true;
  module.walk([&](Operation *op) {
    if (auto dealloc = dyn_cast<memref::DeallocOp>(op); dealloc && !freesOwnScratch(dealloc))
      simple = false;
    if (isa<memref::ReallocOp>(op))
      simple = false;
    auto alloc = dyn_cast<memref::AllocOp>(op);
    if (!alloc || llvm::any_of(alloc->getUsers(), [](Operation *u) { return isa<memref::DeallocOp>(u); }))
      return;
    auto fn = dyn_cast<func::FuncOp>(op->getParentOp());
    if (!fn || op->getBlock() != &fn.getBody().front() || !fn.getBody().hasOneBlock() ||
        escapes(alloc))
      simple = false;
    allocs.push_back(alloc);
  });
  if (!simple)
    return std::nullopt;
  return allocs;
}

struct DeallocateBuffersPass : qkv::ir::impl::DeallocateBuffersBase<DeallocateBuffersPass> {
  void getDependentDialects(DialectRegistry &registry) const override {
    OpPassManager pm(ModuleOp::getOperationName());
    bufferization::buildBufferDeallocationPipeline(pm);
    pm.getDependentDialects(registry);
  }

  void runOnOperation() override {
    std::optional<SmallVector<memref::AllocOp>> allocs = simpleAllocations(getOperation());
    if (!allocs) {
      OpPassManager pm(ModuleOp::getOperationName());
      bufferization::buildBufferDeallocationPipeline(pm);
      if (failed(runPipeline(pm, getOperation())))
        signalPassFailure();
      return;
    }
    for (memref::AllocOp alloc : *allocs) {
      OpBuilder b(alloc->getBlock()->getTerminator());
      memref::DeallocOp::create(b, alloc.getLoc(), alloc.getResult());
    }
  }
};

} // namespace
