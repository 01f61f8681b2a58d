// A graph compiled for the host into object code for a shared library (internal to the
// compiler library): what qkv::export_kernel links into an ahead-of-time bundle. The same
// pipeline, options and code generation as compile() for Target::host(), with code that is
// position independent (host_target_machine(true)) and calls the runtime by the names
// qkv_runtime exports.
#pragma once

#include <string>
#include <vector>

#include <qkv/compiler/compile.hpp>

namespace qkv::host {

struct LibraryObjects {
  /// The entry's C-interface symbol (_mlir_ciface_<function>) and the parts' objects.
  std::string symbol;
  std::vector<std::string> objects;
  /// The options as compile() resolves them: checked decided, the tier resolved.
  CompileOptions options;
  /// CompileStats::isa and matmul_precision.
  std::string isa, matmul_precision;
  /// The code's target: LLVM triple, CPU name and feature string ("+avx2,+fma,...").
  std::string triple, cpu, features;
  /// The pipeline's and LLVM's time.
  double ms = 0;
};

/// Compiles g as compile(g, Target::host(), options) would, for a shared library; with
/// `cpu` (an LLVM CPU name: "x86-64-v3", "znver4", ...), for that CPU instead of the host:
/// its features only, its widest vectors unless the schedule names narrower ones, its best
/// tier unless options (or QKV_ISA) name one it has. Errors as compile()'s: a qkv::Error
/// for a bad graph, option or CPU name, a CompileError naming the stage.
LibraryObjects compile_library_objects(const Graph &g, const CompileOptions &options,
                                       const std::string &cpu = "");

/// The LLVM names of the x86 features that add instructions, which a bundle's manifest
/// lists (as /proc/cpuinfo names them) when its code may use them.
inline constexpr const char *kCpuFeatureNames[] = {"sse4.1",
                                                   "sse4.2",
                                                   "ssse3",
                                                   "popcnt",
                                                   "avx",
                                                   "avx2",
                                                   "fma",
                                                   "f16c",
                                                   "bmi",
                                                   "bmi2",
                                                   "lzcnt",
                                                   "movbe",
                                                   "avx512f",
                                                   "avx512bw",
                                                   "avx512cd",
                                                   "avx512dq",
                                                   "avx512vl",
                                                   "avx512ifma",
                                                   "avx512vbmi",
                                                   "avx512vbmi2",
                                                   "avx512vnni",
                                                   "avx512bitalg",
                                                   "avx512vpopcntdq",
                                                   "avx512bf16",
                                                   "avx512fp16",
                                                   "avxvnni",
                                                   "gfni",
                                                   "vaes",
                                                   "vpclmulqdq",
                                                   "amx-tile",
                                                   "amx-bf16",
                                                   "amx-int8",
                                                   "amx-fp16"};

/// LLVM's native target, initialised once per process: what code generation for the host
/// needs (a CUDA kernel's host code too).
void init_native_target();

} // namespace qkv::host
