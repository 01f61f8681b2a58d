// qkv-map-tiles-to-gpu: the CUDA pipeline's tiled IR onto the GPU. A block forall becomes a
// gpu.launch (its trip counts the grid, which may be dynamic; as many threads as the
// longest thread forall has iterations, or 32 per warp of a warp forall), the thread and
// warp foralls inside it thread-id (warp-id) code with a barrier after each (upstream's
// mapNestedForallToThreadsImpl),
// and allocas marked `qkv.workgroup` the launch's shared-memory attributions.
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/TransformOps/GPUTransformOps.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/PatternMatch.h"

#include "qkv/compiler/transforms/Passes.h"

namespace qkv::ir {
#define GEN_PASS_DEF_MAPTILESTOGPU
#include "qkv/compiler/transforms/Passes.h.inc"
} // namespace qkv::ir

using namespace mlir;

namespace {

constexpr int64_t kWarpSize = 32;

/// The grid size for block dim x, y or z: the trip count of the forall dim mapped to it.
SmallVector<Value, 3> gridOf(RewriterBase &rw, scf::ForallOp op) {
  SmallVector<Value, 3> grid(3, arith::ConstantIndexOp::create(rw, op.getLoc(), 1));
  SmallVector<OpFoldResult> ubs = op.getMixedUpperBound();
  ArrayAttr mapping = *op.getMapping(); // a local: the range must outlive the loop
  for (auto [i, attr] : llvm::enumerate(mapping))
    grid[static_cast<unsigned>(cast<gpu::GPUBlockMappingAttr>(attr).getBlock())] =
        getValueOrCreateConstantIndexOp(rw, op.getLoc(), ubs[i]);
  return grid;
}

/// Allocas marked qkv.workgroup -> workgroup attributions of `launch`.
void promoteWorkgroupBuffers(RewriterBase &rw, gpu::LaunchOp launch) {
  SmallVector<memref::AllocaOp> marked;
  launch.walk([&](memref::AllocaOp a) {
    if (a->hasAttr("qkv.workgroup"))
      marked.push_back(a);
  });
  auto space = gpu::AddressSpaceAttr::get(rw.getContext(), gpu::AddressSpace::Workgroup);
  for (memref::AllocaOp a : marked) {
    MemRefType t = a.getType();
    auto shared = MemRefType::get(t.getShape(), t.getElementType(), MemRefLayoutAttrInterface(),
                                  space);
    BlockArgument buf = launch.addWorkgroupAttribution(shared, a.getLoc());
    rw.replaceAllUsesWith(a.getResult(), buf);
    rw.eraseOp(a);
  }
}

/// Threads per block: the largest trip count of the thread foralls inside, or 32 per warp
/// of a warp forall (static).
std::optional<int64_t> threadsOf(scf::ForallOp op) {
  std::optional<int64_t> most;
  bool dynamic = false;
  op.walk([&](scf::ForallOp inner) {
    if (inner == op)
      return;
    std::optional<ArrayAttr> mapping = inner.getMapping();
    bool warps = mapping && !mapping->empty() && isa<gpu::GPUWarpMappingAttr>((*mapping)[0]);
    int64_t perIteration = warps ? kWarpSize : 1;
    for (OpFoldResult ub : inner.getMixedUpperBound()) {
      std::optional<int64_t> n = getConstantIntValue(ub);
      dynamic |= !n;
      if (n && (!most || *n * perIteration > *most))
        most = *n * perIteration;
    }
  });
  return dynamic ? std::nullopt : most;
}

LogicalResult mapBlocks(RewriterBase &rw, scf::ForallOp op) {
  std::optional<int64_t> threads = threadsOf(op);
  if (!threads)
    return op.emitError("qkv-map-tiles-to-gpu: the thread foralls need static trip counts");
  rw.setInsertionPoint(op);
  SmallVector<Value, 3> grid = gridOf(rw, op);
  Value t = arith::ConstantIndexOp::create(rw, op.getLoc(), *threads);
  Value one = arith::ConstantIndexOp::create(rw, op.getLoc(), 1);
  auto launch = gpu::LaunchOp::create(rw, op.getLoc(), grid[0], grid[1], grid[2], t, one, one);
  Block &body = launch.getBody().front();
  rw.setInsertionPointToEnd(&body);
  auto term = gpu::TerminatorOp::create(rw, op.getLoc());
  gpu::KernelDim3 ids = launch.getBlockIds();
  SmallVector<Value> ivs;
  ArrayAttr mapping = *op.getMapping();
  for (Attribute attr : mapping) {
    auto dim = cast<gpu::GPUBlockMappingAttr>(attr).getBlock();
    ivs.push_back(dim == gpu::MappingId::DimX ? ids.x : dim == gpu::MappingId::DimY ? ids.y : ids.z);
  }
  rw.eraseOp(op.getBody()->getTerminator());
  rw.inlineBlockBefore(op.getBody(), term, ivs);
  rw.eraseOp(op);
  rw.setInsertionPointToStart(&body);
  DiagnosedSilenceableFailure mapped = transform::gpu::mapNestedForallToThreadsImpl(
      rw, std::nullopt, launch, {*threads, 1, 1}, kWarpSize, /*syncAfterDistribute=*/true);
  if (failed(mapped.checkAndReport()))
    return failure();
  promoteWorkgroupBuffers(rw, launch);
  return success();
}

struct MapTilesToGpuPass : qkv::ir::impl::MapTilesToGpuBase<MapTilesToGpuPass> {
  void runOnOperation() override {
    IRRewriter rw(&getContext());
    SmallVector<scf::ForallOp> blocks;
    getOperation().walk([&](scf::ForallOp op) {
      std::optional<ArrayAttr> m = op.getMapping();
      if (m && !m->empty() && isa<gpu::GPUBlockMappingAttr>((*m)[0]))
        blocks.push_back(op);
    });
    for (scf::ForallOp op : blocks)
      if (failed(mapBlocks(rw, op)))
        return signalPassFailure();
  }
};

} // namespace
