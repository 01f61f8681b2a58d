// A kernel's module from the LLVM dialect to LLVM IR, and the attributes that say which CPU
// its code is for (internal to the compiler library): shared by a compile and by the
// deferred schedules a call lowers later (DeferredSchedules.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "mlir/IR/BuiltinOps.h"
#include "llvm/IR/Module.h"
#include "llvm/Target/TargetMachine.h"

namespace qkv::jit {

/// `module` (in the LLVM dialect) as LLVM IR in `ctx`, or nullptr when the translation
/// fails (its diagnostics go to the context's handler). The argument and result
/// attributes of other dialects than LLVM's (qkv.name, qkv.dims, qkv.param, ... which the
/// `llvm` stage still shows) are dropped from every function first: the translation warns
/// about each one, and each warning prints its whole function, so a graph with hundreds of
/// params (a model in one graph) spent seconds printing.
std::unique_ptr<llvm::Module> translate(mlir::ModuleOp module, llvm::LLVMContext &ctx);

/// Gives every function with a body in `m` the attributes of code for the host CPU (every
/// feature `tm` has) at `vector_bits`, or for `target_cpu` (an ahead-of-time bundle for
/// another CPU) with that CPU's own features.
void set_code_attributes(llvm::Module &m, llvm::TargetMachine &tm, int64_t vector_bits,
                         const std::string &target_cpu = "");

} // namespace qkv::jit
