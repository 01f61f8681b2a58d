// Ahead-of-time export: a graph compiled into a bundle that a process without LLVM or MLIR
// loads and runs (qkv::load_bundle, <qkv/runtime/bundle.hpp>; docs/runtime.md, "Bundles").
// MLIR-free header.
#pragma once

#include <cstdint>
#include <string>

#include <qkv/compiler/compile.hpp>
#include <qkv/runtime/bundle.hpp>

namespace qkv {

struct ExportOptions {
  /// Where the bundle's code runs: Target::host() (this host's CPU; a host without one of
  /// its CPU flags refuses it), or Target::cuda(chip), made without a GPU: the kernels'
  /// PTX for `chip` inside host code for any x86-64 CPU, which loads them on device 0 when
  /// the bundle is loaded (docs/runtime.md, "Bundles").
  Target target = Target::host();
  /// How to compile, as for compile() (the cache is not used: a bundle's code is
  /// position independent, the JIT's is not).
  CompileOptions compile;
  /// Target::host(): the CPU the code is for, by LLVM's name ("x86-64-v3" for any AVX2
  /// host, "x86-64-v4", "skylake-avx512", "znver4", ...); empty: this host's CPU, with
  /// every feature it has (the code compile() makes here). For a named CPU the code uses
  /// its features only, its widest vectors (unless compile.schedule.vector_bits names
  /// narrower ones) and its best tier (unless compile.isa or QKV_ISA names one it has);
  /// the bundle then loads on any host with its CPU flags, and computes what the JIT
  /// computes at the same vector width and tier to the tolerance rule, not bit for bit.
  std::string cpu;
  /// The C compiler driver that links kernel.so (it runs the system linker); empty:
  /// $QKV_LINKER, else the first of cc, clang, gcc, clang-22 found on PATH.
  std::string linker;
};

struct ExportResult {
  /// What was written to the folder's manifest.json.
  BundleManifest manifest;
  /// The compile's and the link's wall time, and the bundle's size on disk.
  double compile_ms = 0, link_ms = 0;
  std::int64_t bytes = 0;
};

/// Compiles g as compile(g, options.target, options.compile) would and writes the bundle
/// to `dir` (created if missing; a folder that holds anything but an earlier bundle is
/// refused, and an earlier bundle is replaced): manifest.json, graph.json, kernel.so and
/// the OpenMP runtime the code calls (a CUDA bundle: kernels.ptx instead). load_bundle(dir)
/// then gives a kernel whose results equal, bit for bit, those of the kernel compile()
/// makes on this host with the same options. A bad graph or option is a qkv::Error, a failing pass
/// a CompileError, a failed link a qkv::Error that quotes the linker.
ExportResult export_kernel(const Graph &g, const std::string &dir,
                           const ExportOptions &options = {});

} // namespace qkv
