// Ahead-of-time bundles: a compiled graph in a folder that a process without LLVM or MLIR
// loads and runs (docs/runtime.md, "Bundles"). qkv::export_kernel
// (<qkv/compiler/export.hpp>) writes one; load_bundle, here in the runtime library, runs it.
//
// A bundle's folder holds:
//   manifest.json  what the bundle is (this header's BundleManifest)
//   graph.json     the graph (<qkv/runtime/graph_json.hpp>): inputs are bound and checked
//                  from it, as Kernel::run does for a compiled graph
//   kernel.so      the kernel's code, a shared library whose packed entry point is
//                  "_mlir_" + symbol (<qkv/runtime/kernel_abi.hpp>)
//   libomp.so.5    LLVM's OpenMP runtime, which the code calls, for hosts without one
//                  (host-cpu bundles)
//   kernels.ptx    the kernels' PTX, as lower_to(g, Target::cuda(chip), "ptx") prints it
//                  (cuda bundles; kernel.so carries it too)
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <qkv/dsl/dim.hpp>
#include <qkv/dsl/dtype.hpp>
#include <qkv/runtime/kernel.hpp>

namespace qkv {

/// A bundle's manifest.json.
struct BundleManifest {
  /// The manifest's own format: "qkv-bundle", version kFormatVersion.
  static constexpr int kFormatVersion = 1;

  /// The qkv that wrote it; load_bundle takes bundles of its own version only (the
  /// kernel's calling convention may change between versions).
  std::string qkv_version;
  /// Target::str() of the code: "host-cpu", or "cuda-<chip>" (its host code for any
  /// x86-64 CPU, its kernels' PTX embedded in it, loaded on device 0).
  std::string target;
  /// The graph's name, and the file holding it.
  std::string graph_name, graph_file = "graph.json";
  /// The code: its shared library, its C-interface symbol (_mlir_ciface_<function>), the
  /// LLVM triple and CPU it was compiled for, and the CPU flags it needs, as
  /// /proc/cpuinfo names them (avx2, avx512f, avx512_bf16, amx_tile, ...).
  std::string library = "kernel.so", symbol, triple, cpu;
  std::vector<std::string> cpu_flags;
  /// The shared libraries the code calls that a process may lack, copied into the bundle
  /// ("libomp.so.5": LLVM's OpenMP runtime). The loader uses the process's or the system's
  /// copy where there is one (one OpenMP runtime per process), else the bundle's.
  std::vector<std::string> runtime_libraries;
  /// A CUDA bundle's host code: the functions that load its kernel modules on the device
  /// (called once loaded) and unload them (called when the kernel goes).
  std::vector<std::string> inits, finis;
  /// How it was compiled (CompileStats::isa, matmul_precision, checked).
  std::string isa, matmul_precision;
  bool checked = false;
  /// The graph's inputs and params (in argument order) and outputs, for a reader that
  /// has no graph parser: name, dtype and dims (dynamic dims as kDynamic).
  struct Tensor {
    std::string name;
    DType dtype = DType::F32;
    std::vector<Dim> dims;
  };
  std::vector<Tensor> arguments, outputs;
  /// Every other file of the bundle: its size in bytes and FNV-1a 64-bit hash (16 hex
  /// digits), checked before anything of it is used.
  struct File {
    std::int64_t bytes = 0;
    std::string fnv1a64;
  };
  std::map<std::string, File> files;
};

/// The manifest as JSON text.
std::string manifest_to_json(const BundleManifest &m);
/// The manifest in a bundle's folder. A folder without manifest.json, text that is not a
/// qkv bundle's manifest (another "format", a format version or qkv version this runtime
/// does not read, a missing or mistyped field) is a qkv::Error naming the folder and what
/// is wrong.
BundleManifest read_manifest(const std::string &dir);

/// The FNV-1a 64-bit hash of a file's bytes, as 16 hex digits, and its size; a qkv::Error
/// when it cannot be read.
BundleManifest::File file_sum(const std::string &path);

/// The CPU flags this host has (/proc/cpuinfo's "flags" of its first CPU).
std::vector<std::string> host_cpu_flags();

/// Loads the bundle in `dir` and returns its kernel, which runs as the compiled kernel did
/// (the same code, the same bits). Refused with a qkv::Error, before any of its code is
/// loaded: a bad manifest (read_manifest), a file missing or changed since the export (its
/// size or hash), a host CPU without one of the bundle's CPU flags (named), a target this
/// loader does not run, a CUDA bundle on a machine without a CUDA device ("no CUDA
/// device: ..."), or whose kernels the device does not load, a graph.json that does not parse or
/// does not match the manifest. The kernel keeps the "graph" stage only: Kernel::ir of another
/// stage says to compile the graph. Two loads of one bundle in a process share its code and its
/// schedule and tile counters (the dynamic linker loads kernel.so once).
Kernel load_bundle(const std::string &dir);

} // namespace qkv
