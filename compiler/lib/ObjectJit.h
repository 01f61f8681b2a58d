// LLVM IR -> relocatable object code -> a callable entry point in this process
// (internal to the compiler library). A cold compile and a kernel-cache hit load their
// object through the same load_object(), so every compile exercises the path a hit takes.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "llvm/IR/Module.h"
#include "llvm/Support/Error.h"
#include "llvm/Target/TargetMachine.h"

namespace qkv::jit {

/// A TargetMachine for the host CPU (every feature it has), code generation at -O3, set
/// up as LLVM's JIT sets one up (large code model on x86-64); with `shared_library`, for
/// code linked into a shared library instead (position independent, small code model:
/// what -fPIC gives, for an ahead-of-time bundle).
std::unique_ptr<llvm::TargetMachine> host_target_machine(bool shared_library = false);

/// For code linked into a shared library: the runtime functions load_object binds by
/// address under MLIR's names (memref.alloc's _mlir_memref_to_llvm_alloc, ...) called by
/// the names qkv_runtime exports them under (qkv_buffer_alloc, ...); `names` gives other
/// pairs (called, exported) instead (a CUDA kernel's host functions).
void name_runtime_functions(
    llvm::Module &m, const std::vector<std::pair<std::string, std::string>> *names = nullptr);

/// The host as the cache key names it: triple, CPU name and feature string (computed once
/// per process).
const std::string &host_identity();

/// Gives the module the target machine's triple and data layout, and each C-interface
/// entry point `f` (`_mlir_ciface_*`, what llvm.emit_c_interface makes) a wrapper
/// `_mlir_f(void **args)` that loads each argument through args[i] and calls f: MLIR's
/// packed calling convention (ExecutionEngine::lookupPacked). f and the function it
/// unpacks the descriptors for become internal and always inlined, so that the wrapper
/// alone remains (Kernel::run and a bundle's loader call only it). Every other function
/// with a body, except those named in `called_by_name` (what the loader looks up: a CUDA
/// module's constructors), becomes internal: nothing outside the kernel calls it.
void prepare_module(llvm::Module &m, llvm::TargetMachine &tm,
                    const std::vector<std::string> &called_by_name = {});

/// Whether `f` has a loop (a back edge in its control flow graph). Glue has none.
bool has_loop(const llvm::Function &f);

/// LLVM's default module pipeline at `opt_level` (0-3) with the loop unroller and the SLP
/// vectorizer off: MLIR has already tiled, vectorized and unrolled the hot loops, and
/// LLVM unrolling the loops MLIR keeps rolled (a matmul's K loop, a tile's key loop)
/// only grows the code it must then compile (a third of mha's cold compile, at no
/// measured speed). The loop vectorizer stays on for the scalar loops MLIR leaves. GVN,
/// constraint elimination and dead store elimination skip large functions without loops.
void optimize(llvm::Module &m, int opt_level, llvm::TargetMachine &tm);

/// The object file (ELF, relocatable) the target machine makes of the module.
llvm::Expected<std::string> emit_object(llvm::Module &m, llvm::TargetMachine &tm);

/// The errors of deferred parts that failed to compile when a call first reached them
/// (reported from whichever thread made that call). Such a call returns without the
/// part's work done; its caller takes the errors after the call and fails it.
class DeferredFailureLog {
public:
  void report(std::string error);
  /// The errors reported since the last take, one per line; "" when none.
  std::string take();

private:
  std::mutex mutex_;
  std::vector<std::string> errors_;
};
using DeferredFailures = std::shared_ptr<DeferredFailureLog>;

struct LoadedObject {
  std::shared_ptr<void> owner; ///< keeps the code mapped
  void (*packed)(void **) = nullptr;
  /// The string global `qkv_packed_params` of the objects (the params the entry takes
  /// packed, after its outputs), or "" when they define none.
  std::string packed_params;
  /// The attention schedules the kernel counts per call (qkv-lower-attention-to-flash):
  /// the string global `qkv_schedules` naming them and its counters `qkv_schedule_runs`,
  /// or "" and null.
  std::string schedules;
  std::int64_t *schedule_runs = nullptr;
  /// The attention ops whose tiles it counts (`qkv_attentions`) and the counts
  /// (`qkv_tile_counts`, three per op), or "" and null.
  std::string attentions;
  std::int64_t *tile_counts = nullptr;
  /// Where the JIT logs the deferred parts that fail to compile; null without such parts.
  DeferredFailures deferred_failures;
};

/// Links `objects` (one kernel's parts) into a fresh JIT in this process, resolving their
/// undefined symbols against one another, the process and the libraries kernels call
/// (libomp, libmlir_c_runner_utils), and returns the packed entry `_mlir_` + `symbol`.
/// Runs no optimiser and no code generator. `extra` adds symbols by name (the CUDA host
/// functions); `inits` are called once linked, in order, and `finis` when the code is
/// unloaded (a CUDA kernel's module loaders and unloaders: the JIT runs no initialisers).
llvm::Expected<LoadedObject>
load_object(const std::vector<std::string> &objects, const std::string &symbol,
            const std::vector<std::pair<std::string, void *>> &extra = {},
            const std::vector<std::string> &inits = {},
            const std::vector<std::string> &finis = {});

} // namespace qkv::jit
