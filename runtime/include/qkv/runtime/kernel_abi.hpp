// A compiled kernel's calling convention, in one place: what the compiler's import and
// passes produce, and what the JIT loader and Kernel::run rely on.
//
// The entry function of graph g is named function_name(g.name()). Its memref arguments,
// in order: the graph's arguments (Graph::arguments(): inputs and params, in creation
// order), then its outputs (Graph::outputs()' order; the kernel writes every element),
// then the packed copy of each param its GEMMs read packed, in the order of the
// kPackedParams list. It is called through MLIR's C interface (llvm.emit_c_interface:
// each memref as a pointer to its descriptor), wrapped once more so that one `void **`
// of argument pointers calls it (packed_symbol).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace qkv {
class Tensor;
struct KernelEntry;
}

namespace qkv::abi {

/// The entry function's name: the graph's name with every character that is not a letter,
/// digit or '_' replaced by '_', and "g_" before a leading digit or an empty name.
std::string function_name(std::string_view graph_name);

/// MLIR's C-interface wrapper of a function f is "_mlir_ciface_" + f.
inline constexpr std::string_view kCInterfacePrefix = "_mlir_ciface_";
/// The packed wrapper of a C-interface function s (one `void **` argument) is "_mlir_" + s.
inline constexpr std::string_view kPackedPrefix = "_mlir_";
inline std::string c_interface_symbol(std::string_view function) {
  return std::string(kCInterfacePrefix) + std::string(function);
}

/// Globals a kernel's object may define, read when it is loaded:
/// "<param argument>:<panel columns>:<rows per packed row>:<dtype>:<row multiple>" per
/// packed param, ','-separated (qkv-lower-matmul-to-microkernels).
inline constexpr const char *kPackedParams = "qkv_packed_params";
/// The attention schedules' names (','-separated) and an i64 count of runs per schedule
/// (qkv-lower-attention-to-flash).
inline constexpr const char *kSchedules = "qkv_schedules";
inline constexpr const char *kScheduleRuns = "qkv_schedule_runs";
/// The attention ops' names and their tile counts (tiles, computed, full per op).
inline constexpr const char *kAttentions = "qkv_attentions";
inline constexpr const char *kTileCounts = "qkv_tile_counts";
/// The prefix of a deferred attention schedule's function: qkv-lower-attention-to-flash
/// outlines each kernel a dynamic query length takes below its longest tiles into a private
/// function `qkv_deferred_schedule_<n>`, which a JIT compile takes out of the module right
/// after that pass and lowers, optimises and compiles when a call first reaches it.
inline constexpr std::string_view kDeferredSchedulePrefix = "qkv_deferred_schedule_";
/// The LLVM function attribute of a deferred function: a JIT compile leaves it to the first
/// call that reaches it (a deferred schedule's stub; a GEMM's skinny function, which only a
/// task of few rows takes: qkv-lower-matmul-to-microkernels).
inline constexpr const char *kDeferredFunctionAttr = "qkv-deferred";

/// The globals above as a kernel's loader (the JIT's, or a bundle's: qkv/runtime/bundle.hpp)
/// found them in its code: null where the kernel defines none.
struct Globals {
  const char *packed_params = nullptr, *schedules = nullptr, *attentions = nullptr;
  std::int64_t *schedule_runs = nullptr, *tile_counts = nullptr;
};
/// Fills entry's packed_params, schedules and attentions (and their counters) from a
/// kernel's globals; a malformed packed-param list is a qkv::Error.
void apply_globals(const Globals &globals, KernelEntry &entry);

/// Calls generated code (the JIT's objects, a bundle's library) through a pointer. Clang's
/// -fsanitize=function (in a sanitized build's UBSan) reads a type signature from the 8
/// bytes before an indirect callee; generated code carries none, which the check would
/// tolerate, but a JIT'd function at the start of a page may have nothing mapped before it,
/// and the read is then a SEGV. So these calls go unchecked.
#if defined(__clang__)
#define QKV_UNCHECKED_CALL [[clang::no_sanitize("function")]]
#else
#define QKV_UNCHECKED_CALL
#endif
template <class... Args>
QKV_UNCHECKED_CALL inline void call_generated(void (*f)(Args...), Args... args) {
  f(args...);
}

/// A ranked memref descriptor as MLIR lays it out: {allocated, aligned, offset,
/// sizes[rank], strides[rank]}, all 64-bit.
std::vector<std::int64_t> descriptor(const Tensor &t);

} // namespace qkv::abi

/// memref.copy between memrefs that are not both contiguous, which finalize-memref-to-llvm
/// lowers to a call of MLIR's `memrefCopy` (mlir/ExecutionEngine/CRunnerUtils.h) with the
/// same arguments: the element size and two unranked memrefs ({rank, descriptor}). The JIT
/// and a bundle's code call this one: MLIR's lives in a library that needs LLVM and MLIR,
/// which a process running a bundle does not have.
extern "C" void qkv_memref_copy(std::int64_t element_bytes, void *source, void *destination);

