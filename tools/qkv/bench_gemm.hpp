// `qkv bench gemm`: one projection timed against the FMA peak and OpenBLAS's sgemm.
#pragma once

#include "cli.hpp"

namespace qkv::tool {

extern const char *const kBenchGemmHelp;
/// Runs the benchmark; returns the exit status (1 when OpenBLAS disagrees with qkv).
int cmd_bench_gemm(const cli::Args &a);

} // namespace qkv::tool
