// Deferred attention schedules (docs/compiler.md, "Deferred schedules"): the kernels a query
// length bound at run time takes below its longest tiles, which qkv-lower-attention-to-flash
// outlines into functions of their own (abi::kDeferredSchedulePrefix), leave a JIT
// compile's module after the `linalg` stage as MLIR. The kernel's LLVM module gets a stub
// for each, which compile_in_parts makes a deferred part; when a call first reaches it, the
// lazy JIT lowers the stub's MLIR through the `loops` and `llvm` stages, translates,
// optimises and compiles it (internal to the compiler library).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "mlir/IR/BuiltinOps.h"
#include "llvm/IR/Module.h"
#include "llvm/Target/TargetMachine.h"

#include "qkv/compiler/transforms/Passes.h"

namespace qkv::jit {

/// One deferred schedule: its function's name and a module of that function and
/// declarations of the symbols it uses, as MLIR bytecode.
struct DeferredSchedule {
  std::string name, mlir;
};

/// Takes each deferred schedule's function out of `module` (at the end of the `linalg`
/// stage), leaving a private declaration in its place.
std::vector<DeferredSchedule> take_deferred_schedules(mlir::ModuleOp module);

/// Gives the declaration of each of `schedules` in `m` (the kernel's LLVM module, before
/// prepare_module) a stub body that carries the schedule's MLIR and the pipeline's options
/// `o`, and the attribute kDeferredAttr (compile_in_parts makes each a deferred part).
void add_deferred_stubs(llvm::Module &m, const std::vector<DeferredSchedule> &schedules,
                        const ir::CpuPipelineOptions &o);

/// For a deferred part whose function is such a stub: the schedule's code, lowered from
/// the stub's MLIR through the `loops` and `llvm` stages and translated into m's context,
/// for the host CPU (`tm`, which then optimises it), its function named and linked as the
/// stub was; nullptr for a part without a stub. Throws CompileError when a stage fails.
std::unique_ptr<llvm::Module> lower_deferred_stub(llvm::Module &m, llvm::TargetMachine &tm);

} // namespace qkv::jit
