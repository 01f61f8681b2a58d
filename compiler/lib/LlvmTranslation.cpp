#include "LlvmTranslation.h"

#include <qkv/runtime/kernel_abi.hpp>

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/TargetParser/Host.h"

namespace qkv::jit {

namespace {

void drop_foreign_argument_attrs(mlir::ModuleOp module) {
  auto keep_llvm = [](mlir::DictionaryAttr attrs) {
    llvm::SmallVector<mlir::NamedAttribute> kept;
    if (attrs)
      for (mlir::NamedAttribute a : attrs)
        if (a.getName().strref().starts_with("llvm."))
          kept.push_back(a);
    return kept;
  };
  module.walk([&](mlir::LLVM::LLVMFuncOp fn) {
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      fn.setArgAttrs(i, keep_llvm(fn.getArgAttrDict(i)));
    for (unsigned i = 0; i < fn.getNumResults(); ++i)
      fn.setResultAttrs(i, keep_llvm(fn.getResultAttrDict(i)));
  });
}

} // namespace

std::unique_ptr<llvm::Module> translate(mlir::ModuleOp module, llvm::LLVMContext &ctx) {
  drop_foreign_argument_attrs(module);
  return mlir::translateModuleToLLVMIR(module, ctx);
}

void set_code_attributes(llvm::Module &m, llvm::TargetMachine &tm, int64_t vector_bits,
                         const std::string &target_cpu) {
  // The schedule's vector width: LLVM otherwise keeps to 256-bit vectors on some AVX-512
  // machines.
  std::string cpu = target_cpu.empty() ? llvm::sys::getHostCPUName().str() : target_cpu,
              features = target_cpu.empty() ? tm.getTargetFeatureString().str() : "";
  for (llvm::Function &f : m) {
    if (f.isDeclaration())
      continue;
    f.addFnAttr("target-cpu", cpu);
    f.addFnAttr("target-features", features);
    f.addFnAttr("prefer-vector-width", std::to_string(vector_bits));
    f.addFnAttr("min-legal-vector-width", std::to_string(vector_bits));
    // The entry point and its packed wrapper are glue (descriptors unpacked, buffers
    // allocated, layers and parallel regions called; no vector code): one basic block of
    // thousands of instructions for a model in one graph. The host's scheduling model buys
    // them nothing, and the post-RA list scheduler some hosts enable (Zen), quadratic in a
    // block's length, was 40% of the code generator's time on a 24-layer encoder.
    if (f.getName().starts_with(abi::kPackedPrefix))
      f.addFnAttr("tune-cpu", "generic");
  }
}

} // namespace qkv::jit
