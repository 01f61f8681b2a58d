// The CUDA target's side of qkv::compile and qkv::lower_to (internal to the compiler
// library; docs/gpu.md).
#pragma once

#include <string>
#include <vector>

#include <qkv/compiler/compile.hpp>

namespace qkv::cuda_target {

/// Target::cuda()'s stage `stage` of g: the CUDA pipeline run up to it, printed (for
/// "ptx", the PTX of every kernel module). Needs no GPU.
std::string lower(const Graph &g, const Target &target, const std::string &stage,
                  const CompileOptions &options);

/// A graph's CUDA code without a GPU: the host code's object (its kernel modules' PTX
/// embedded as constants), the functions that load and unload those modules (the loader
/// calls them: neither the JIT nor a bundle runs initialisers), the entry's C-interface
/// symbol, and the PTX as lower(..., "ptx") prints it.
struct HostCode {
  std::vector<std::string> objects, inits, finis;
  std::string symbol, ptx;
  /// Each kernel module's name (its gpu.binary's symbol) and PTX.
  std::vector<std::pair<std::string, std::string>> modules;
};
/// `shared_library`: the object for a shared library (an ahead-of-time bundle), calling
/// the host functions by the names qkv_runtime exports (cuda::host_function_exports), its
/// code for any x86-64 CPU (kPortableCpu) rather than this host's.
inline constexpr const char *kPortableCpu = "x86-64";
HostCode host_code(const Graph &g, const Target &target, const CompileOptions &options,
                   bool shared_library);

/// compile(g, Target::cuda(...)): needs a GPU (device 0); its kernel modules are loaded
/// there until the Kernel goes.
Kernel compile(const Graph &g, const Target &target, const CompileOptions &options);

} // namespace qkv::cuda_target
