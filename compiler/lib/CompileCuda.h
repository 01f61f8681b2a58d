// The CUDA target's side of qkv::compile and qkv::lower_to (internal to the compiler
// library; docs/gpu.md).
#pragma once

#include <string>

#include <qkv/compiler/compile.hpp>

namespace qkv::cuda_target {

/// Target::cuda()'s stage `stage` of g: the CUDA pipeline run up to it, printed (for
/// "ptx", the PTX of every kernel module). Needs no GPU.
std::string lower(const Graph &g, const Target &target, const std::string &stage,
                  const CompileOptions &options);

/// compile(g, Target::cuda(...)): needs a GPU (device 0); its kernel modules are loaded
/// there until the Kernel goes.
Kernel compile(const Graph &g, const Target &target, const CompileOptions &options);

} // namespace qkv::cuda_target
