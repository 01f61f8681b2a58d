// qkv-restore-bf16-mma: after convert-nvgpu-to-nvvm, the mma.sync ops of a kernel that
// qkv-warp-mma-to-nvgpu marked `qkv.bf16_mma` (its bf16 tiles carried as f16, whose
// m16n8k16 fragments are laid out the same: WarpMmaToNvgpu.cpp) made bf16 again, their
// f16 pairs bitcast to the i32 registers mma.sync takes.
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/Builders.h"

#include "qkv/compiler/transforms/Passes.h"

#include "Bf16Mma.h"

namespace qkv::ir {
#define GEN_PASS_DEF_RESTOREBF16MMA
#include "qkv/compiler/transforms/Passes.h.inc"
} // namespace qkv::ir

using namespace mlir;

namespace {

struct RestoreBf16MmaPass : qkv::ir::impl::RestoreBf16MmaBase<RestoreBf16MmaPass> {
  void runOnOperation() override {
    gpu::GPUFuncOp fn = getOperation();
    if (!fn->hasAttr(qkv::ir::kBf16MmaMark))
      return;
    fn->removeAttr(qkv::ir::kBf16MmaMark);
    OpBuilder b(&getContext());
    Type i32 = b.getI32Type();
    WalkResult r = fn.walk([&](NVVM::MmaOp mma) {
      auto pair = VectorType::get({2}, b.getF16Type());
      auto isF16 = [&](ValueRange vs) {
        return llvm::all_of(vs, [&](Value v) { return v.getType() == pair; });
      };
      if (!isF16(mma.getOperandA()) || !isF16(mma.getOperandB())) {
        mma.emitError("qkv-restore-bf16-mma: expected an f16 mma.sync in a bf16 kernel");
        return WalkResult::interrupt();
      }
      b.setInsertionPoint(mma);
      unsigned ab = mma.getOperandA().size() + mma.getOperandB().size();
      for (unsigned i = 0; i < ab; ++i)
        mma->setOperand(i, LLVM::BitcastOp::create(b, mma.getLoc(), i32, mma->getOperand(i)));
      mma.setMultiplicandAPtxType(NVVM::MMATypes::bf16);
      mma.setMultiplicandBPtxType(NVVM::MMATypes::bf16);
      return WalkResult::advance();
    });
    if (r.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
