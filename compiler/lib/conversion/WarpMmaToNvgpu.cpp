// qkv-warp-mma-to-nvgpu: the attention kernel's warp-level tile
// contractions (vector.contract of 16x8x16 tiles read from and written to workgroup
// buffers, AttentionToGpuTiles.cpp) onto mma.sync, through MLIR's own vector-to-nvgpu
// conversion (convertVectorToNVVMCompatibleMMASync), which knows the fragment layouts.
//
// Two things stand between the kernel and that conversion in MLIR 22:
// - It takes every scalar elementwise op (an index addition) for a fragment op and fails
//   on it. So it is given only the runs of consecutive warp tile ops (transfer_read,
//   contract, transfer_write, vector constants), each wrapped for the call in an
//   scf.execute_region that is inlined again afterwards.
// - It knows f16 but not bf16, and mma.sync's m16n8k16 fragments are laid out the same for
//   both (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type"). So in a
//   bf16 kernel, the bf16 workgroup buffers hold their bits as f16 (stores and loads
//   bitcast, the contractions read f16) and the function is marked `qkv.bf16_mma`; after
//   convert-nvgpu-to-nvvm, qkv-restore-bf16-mma (RestoreBf16Mma.cpp) makes its mma.sync
//   ops bf16 again (i32 pairs). Nothing in between computes on those f16 values: they are
//   only moved.
// Every kernel's workgroup buffers are also aligned to 16 bytes here, as ldmatrix needs.
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Conversion/VectorToGPU/VectorToGPU.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "qkv/compiler/transforms/Passes.h"

#include "Bf16Mma.h"

namespace qkv::ir {
#define GEN_PASS_DEF_WARPMMATONVGPU
#include "qkv/compiler/transforms/Passes.h.inc"
} // namespace qkv::ir

using namespace mlir;

namespace {

constexpr int64_t kSharedAlign = 16;

/// The bf16 contractions of `fn`, or failure when it mixes them with others.
FailureOr<SmallVector<vector::ContractionOp>> bf16Contracts(gpu::GPUFuncOp fn) {
  SmallVector<vector::ContractionOp> bf16, other;
  fn.walk([&](vector::ContractionOp c) {
    (getElementTypeOrSelf(c.getLhsType()).isBF16() ? bf16 : other).push_back(c);
  });
  if (!bf16.empty() && !other.empty())
    return fn.emitError("qkv-warp-mma-to-nvgpu: a kernel with both bf16 and other contractions");
  return bf16;
}

/// One use of a retyped buffer (now f16) mended: its bf16 values cross as bitcasts.
LogicalResult mendUse(RewriterBase &rw, Operation *user, Type f16, Type bf16) {
  rw.setInsertionPoint(user);
  Location loc = user->getLoc();
  if (auto store = dyn_cast<memref::StoreOp>(user)) {
    Value bits = arith::BitcastOp::create(rw, loc, f16, store.getValueToStore());
    rw.modifyOpInPlace(store, [&] { store.getValueMutable().assign(bits); });
    return success();
  }
  if (auto load = dyn_cast<memref::LoadOp>(user)) {
    rw.setInsertionPointAfter(load);
    auto back = arith::BitcastOp::create(rw, loc, bf16, load.getResult());
    rw.replaceAllUsesExcept(load.getResult(), back.getResult(), back);
    rw.modifyOpInPlace(load, [&] { load.getResult().setType(f16); });
    return success();
  }
  if (auto read = dyn_cast<vector::TransferReadOp>(user)) {
    // Read by contractions only: they take the f16 bits directly.
    for (Operation *u : read->getUsers())
      if (!isa<vector::ContractionOp>(u))
        return read.emitError("qkv-warp-mma-to-nvgpu: a bf16 tile read by something other than "
                              "a contraction");
    Value pad = arith::ConstantOp::create(rw, loc, f16, rw.getFloatAttr(f16, 0.0));
    auto vt = VectorType::get(read.getVectorType().getShape(), f16);
    rw.modifyOpInPlace(read, [&] {
      read.getPaddingMutable().assign(pad);
      read.getResult().setType(vt);
    });
    return success();
  }
  return user->emitError("qkv-warp-mma-to-nvgpu: unexpected use of a bf16 workgroup buffer");
}

/// Holds the bf16 workgroup buffers of `fn` as f16 bits and marks it (see the top).
LogicalResult bf16AsF16(gpu::GPUFuncOp fn, ArrayRef<vector::ContractionOp> contracts) {
  IRRewriter rw(fn.getContext());
  Type f16 = rw.getF16Type(), bf16 = rw.getBF16Type();
  for (BlockArgument buf : fn.getWorkgroupAttributions()) {
    auto mt = cast<MemRefType>(buf.getType());
    if (!mt.getElementType().isBF16())
      continue;
    buf.setType(MemRefType::get(mt.getShape(), f16, mt.getLayout(), mt.getMemorySpace()));
    for (Operation *user : llvm::make_early_inc_range(buf.getUsers()))
      if (failed(mendUse(rw, user, f16, bf16)))
        return failure();
  }
  for (vector::ContractionOp c : contracts)
    if (!getElementTypeOrSelf(c.getLhsType()).isF16() ||
        !getElementTypeOrSelf(c.getRhsType()).isF16())
      return c.emitError("qkv-warp-mma-to-nvgpu: a bf16 contraction that does not read a "
                         "workgroup buffer");
  fn->setAttr(qkv::ir::kBf16MmaMark, rw.getUnitAttr());
  return success();
}

/// A warp tile op: what the runs handed to the conversion consist of.
bool isTileOp(Operation *op) {
  if (isa<vector::TransferReadOp, vector::TransferWriteOp, vector::ContractionOp>(op))
    return true;
  auto c = dyn_cast<arith::ConstantOp>(op);
  return c && isa<VectorType>(c.getType());
}

/// The maximal runs of consecutive tile ops in `fn` that hold a contraction.
SmallVector<SmallVector<Operation *>> tileRuns(gpu::GPUFuncOp fn) {
  SmallVector<SmallVector<Operation *>> runs;
  fn.walk([&](Block *block) {
    SmallVector<Operation *> run;
    auto flush = [&] {
      if (llvm::any_of(run, [](Operation *op) { return isa<vector::ContractionOp>(op); }))
        runs.push_back(run);
      run.clear();
    };
    for (Operation &op : *block) {
      if (isTileOp(&op))
        run.push_back(&op);
      else
        flush();
    }
    flush();
  });
  return runs;
}

/// The ops of `run` converted to nvgpu (mma.sync, per-lane or ldmatrix loads, stores),
/// inside a scf.execute_region made for the call and inlined again.
LogicalResult convertRun(IRRewriter &rw, ArrayRef<Operation *> run) {
  llvm::SmallPtrSet<Operation *, 16> inRun(run.begin(), run.end());
  for (Operation *op : run)
    for (Operation *user : op->getUsers())
      if (!inRun.contains(user))
        return op->emitError("qkv-warp-mma-to-nvgpu: a warp tile value used outside its run");
  rw.setInsertionPoint(run.front());
  auto region = scf::ExecuteRegionOp::create(rw, run.front()->getLoc(), TypeRange{});
  Block *body = rw.createBlock(&region.getRegion());
  for (Operation *op : run)
    op->moveBefore(body, body->end());
  rw.setInsertionPointToEnd(body);
  scf::YieldOp::create(rw, region.getLoc());
  if (failed(convertVectorToNVVMCompatibleMMASync(rw, region)))
    return failure();
  // The conversion leaves the replaced reads and contractions behind, unused.
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(*body)))
    if (isOpTriviallyDead(&op))
      rw.eraseOp(&op);
  rw.eraseOp(body->getTerminator());
  rw.inlineBlockBefore(body, region);
  rw.eraseOp(region);
  return success();
}

struct WarpMmaToNvgpuPass : qkv::ir::impl::WarpMmaToNvgpuBase<WarpMmaToNvgpuPass> {
  void runOnOperation() override {
    gpu::GPUFuncOp fn = getOperation();
    // ldmatrix reads 16-byte rows, and vector loads want their width: the workgroup
    // buffers start 16-byte aligned (the default is the element's alignment).
    for (unsigned i = 0; i < fn.getNumWorkgroupAttributions(); ++i)
      fn.setWorkgroupAttributionAttr(
          i, StringAttr::get(fn.getContext(), LLVM::LLVMDialect::getAlignAttrName()),
          IntegerAttr::get(IntegerType::get(fn.getContext(), 64), kSharedAlign));
    // Only the attention kernel has contractions: the other kernels need nothing more.
    if (!fn.walk([](vector::ContractionOp) { return WalkResult::interrupt(); }).wasInterrupted())
      return;
    FailureOr<SmallVector<vector::ContractionOp>> bf16 = bf16Contracts(fn);
    if (failed(bf16) || (!bf16->empty() && failed(bf16AsF16(fn, *bf16))))
      return signalPassFailure();
    RewritePatternSet patterns(&getContext());
    populatePrepareVectorToMMAPatterns(patterns, /*useNvGpu=*/true);
    if (failed(applyPatternsGreedily(fn, std::move(patterns))))
      return signalPassFailure();
    IRRewriter rw(&getContext());
    for (ArrayRef<Operation *> run : tileRuns(fn))
      if (failed(convertRun(rw, run)))
        return signalPassFailure();
  }
};

} // namespace
