// Perf map files for JIT-compiled kernels (internal to the compiler library).
#pragma once

#include "llvm/ExecutionEngine/Orc/LLJIT.h"

namespace qkv::jit {

/// When the environment sets QKV_PERF_MAP (to anything but 0), makes every object `jit`
/// links append its functions to /tmp/perf-<pid>.map, so that `perf report` names the
/// kernels' functions (the GEMM blocks, the attention tiles, OpenMP's outlined loops).
void add_perf_map(llvm::orc::LLJIT &jit);

} // namespace qkv::jit
