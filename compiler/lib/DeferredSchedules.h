// Deferred attention schedules (docs/compiler.md, "Deferred schedules"): the kernels a query
// length bound at run time takes below its longest tiles, which qkv-lower-attention-to-flash
// outlines into functions of their own (abi::kDeferredSchedulePrefix), leave a JIT
// compile's module right after that pass as MLIR. The kernel's LLVM module gets a stub
// for each, which compile_in_parts makes a deferred part; when a call first reaches it, the
// lazy JIT lowers the stub's MLIR through the rest of the `linalg` stage and the `loops` and
// `llvm` stages, translates, optimises and compiles it (internal to the compiler library).
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

/// A deferred schedule taken out of its kernel's module: its function (public) in a module
/// of its own, with declarations of the symbols it uses, not yet bound to its call.
struct HeldSchedule {
  std::string name;
  mlir::OwningOpRef<mlir::ModuleOp> module;
};

/// Takes each deferred schedule's function out of `module` (a JIT compile: right after the
/// flash pass, so that the `linalg` stage's other passes lower only the kernel's own code),
/// leaving a private declaration in its place.
std::vector<HeldSchedule> hold_deferred_schedules(mlir::ModuleOp module);

/// The held schedules as MLIR bytecode, each with the constants its one call in `module`
/// passes bound (once the `linalg` stage has folded the static dims and the scale there):
/// the schedule's code is optimised for them, as the kernel's own code is.
std::vector<DeferredSchedule> bind_deferred_schedules(std::vector<HeldSchedule> &held,
                                                      mlir::ModuleOp module);

/// Gives the declaration of each of `schedules` in `m` (the kernel's LLVM module, before
/// prepare_module) a stub body that carries the schedule's MLIR and the pipeline's options
/// `o`, and the attribute kDeferredAttr (compile_in_parts makes each a deferred part).
void add_deferred_stubs(llvm::Module &m, const std::vector<DeferredSchedule> &schedules,
                        const ir::CpuPipelineOptions &o);

/// For a deferred part whose function is such a stub: the schedule's code, lowered from
/// the stub's MLIR through the rest of the `linalg` stage, `loops` and `llvm`, translated into m's
/// context, for the host CPU (`tm`, which then optimises it), its function named and linked as the
/// stub was; nullptr for a part without a stub. Throws CompileError when a stage fails.
std::unique_ptr<llvm::Module> lower_deferred_stub(llvm::Module &m, llvm::TargetMachine &tm);

} // namespace qkv::jit
