// `qkv bench NAME`: a gallery graph at a shape, timed against the machine's FMA peak and
// read bandwidth and against the baselines of qkv_bench_common, all in this process.
#pragma once

#include "cli.hpp"

namespace qkv::tool {

extern const char *const kBenchHelp;
/// Runs the benchmark; returns the exit status (1 when a baseline disagrees with qkv).
int cmd_bench(const cli::Args &a);

} // namespace qkv::tool
