// qkv-convert-to-llvm: the CPU pipeline's last conversion. Every dialect left (arith,
// index, func, cf, omp, amx, vector, x86vector) goes to the LLVM dialect in one
// applyPartialConversion with one type converter: the patterns of each loaded dialect's
// ConvertToLLVMPatternInterface, as upstream convert-to-llvm collects them, except that
// vector's are populated here with the options qkv's kernels need (reductions that LLVM
// may reassociate, 32-bit mask indices), which its interface does not take, and
// x86vector's (which has no interface) are added. A separate convert-vector-to-llvm
// walked the whole module once more for its own conversion.
#include "mlir/Conversion/ConvertToLLVM/ToLLVMInterface.h"
#include "mlir/Conversion/LLVMCommon/ConversionTarget.h"
#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVM.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Vector/Transforms/LoweringPatterns.h"
#include "mlir/Dialect/X86Vector/Transforms.h"
#include "mlir/Transforms/DialectConversion.h"

#include "qkv/compiler/transforms/Passes.h"

namespace qkv::ir {
#define GEN_PASS_DEF_CONVERTTOLLVM
#include "qkv/compiler/transforms/Passes.h.inc"
} // namespace qkv::ir

using namespace mlir;

namespace {

struct ConvertToLLVMPass : qkv::ir::impl::ConvertToLLVMBase<ConvertToLLVMPass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    LLVMTypeConverter converter(ctx);
    LLVMConversionTarget target(*ctx);
    RewritePatternSet patterns(ctx);
    for (Dialect *dialect : ctx->getLoadedDialects()) {
      auto *iface = dyn_cast<ConvertToLLVMPatternInterface>(dialect);
      if (iface && !isa<vector::VectorDialect>(dialect))
        iface->populateConvertToLLVMConversionPatterns(target, converter, patterns);
    }
    vector::populateVectorTransferLoweringPatterns(patterns);
    populateVectorToLLVMConversionPatterns(converter, patterns,
                                           /*reassociateFPReductions=*/true,
                                           /*force32BitVectorIndices=*/true);
    configureX86VectorLegalizeForExportTarget(target);
    populateX86VectorLegalizeForLLVMExportPatterns(converter, patterns);
    if (failed(applyPartialConversion(getOperation(), target, std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
