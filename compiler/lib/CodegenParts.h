// LLVM's optimiser and code generator on several threads: a kernel's LLVM module split
// into parts of about equal size, each optimised and compiled to its own object in its
// own LLVMContext (internal to the compiler library; docs/compiler.md, "Compile time").
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "llvm/IR/Module.h"

#include <qkv/runtime/kernel_abi.hpp>

namespace qkv::jit {

/// The most parts a module is split into: `requested` (CompileOptions::compile_threads),
/// or when 0 the host's hardware threads, at most 4.
unsigned codegen_parts(int requested);

/// One part after LLVM: its optimised IR as text and its relocatable object code; or, for a
/// deferred part, its unoptimised bitcode (`object`), which load_object compiles when a
/// call first runs one of its functions. A part with both glue (generated unoptimised) and
/// other code has the glue's object apart, in `glue_object` (else empty).
struct CompiledPart {
  std::string ir, object, glue_object;
  bool deferred = false;
};

/// Moves `p`'s code (its glue's object first, when apart) to the end of `objects`.
void take_objects(CompiledPart &p, std::vector<std::string> &objects);

/// The function attribute of a deferred function (abi::kDeferredFunctionAttr): a deferred
/// attention schedule's stub (add_deferred_stubs, DeferredSchedules.h), a GEMM's skinny
/// function where the rows are bound at run time.
inline constexpr const char *kDeferredAttr = abi::kDeferredFunctionAttr;
/// The module flag of a deferred part: the opt level it is optimised at when compiled.
inline constexpr const char *kOptLevelFlag = "qkv.opt_level";

/// Optimises `m` at `opt_level` and compiles it for the host, as up to `parts` modules
/// on as many threads. Functions that call one another directly stay in one part (LLVM
/// may still inline them); the OpenMP task bodies, which only __kmpc_fork_call's
/// function pointer reaches, are spread over the parts, largest first, each to the part
/// with the fewest instructions so far. Internal functions and variables that another
/// part refers to become external (the JIT links the objects together); internal
/// constants are copied into every part that uses them. The result is deterministic:
/// the same module and part count give the same objects. `m` is left as the first part
/// (compiled in place: the other parts' bodies deleted, its internal symbols externalised)
/// and should not be used again.
/// `keep_ir`: print each part's optimised IR into CompiledPart::ir (else it stays empty).
/// `shared_library`: code for a shared library (host_target_machine's).
/// `defer`: each cluster of functions that are all deferred (kDeferredAttr)
/// becomes a part of its own, returned as bitcode after the compiled parts (not counted
/// in `parts`); without it they are compiled with the rest.
std::vector<CompiledPart> compile_in_parts(llvm::Module &m, unsigned parts, int opt_level,
                                           bool keep_ir = true, bool shared_library = false,
                                           bool defer = false);

} // namespace qkv::jit
