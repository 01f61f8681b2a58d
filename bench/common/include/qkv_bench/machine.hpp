// What this machine can do, measured in process: the fp32 FMA peak of the widest vector
// ISA the CPU has, and the read bandwidth from memory, each on T threads at once. The
// roofline that `qkv bench` reports percentages of.
#pragma once

#include <cstddef>
#include <string_view>

namespace qkv::bench {

/// The vector ISA the FMA loop and the bandwidth loop use.
enum class Isa { Avx512, Avx2, Scalar };
/// AVX-512F if the CPU has it, else AVX2 with FMA, else scalar (__builtin_cpu_supports).
Isa host_isa();
std::string_view isa_name(Isa isa);
/// Logical CPUs (std::thread::hardware_concurrency, at least 1).
int hardware_threads();
/// Size of the last-level cache in bytes (sysfs, else sysconf; 32 MiB when unknown).
std::size_t last_level_cache_bytes();

/// A median over `runs` repetitions.
struct Measurement {
  double value = 0;
  int runs = 0;
};

/// fp32 GFLOP/s of `threads` threads each running independent FMA chains (enough
/// accumulators to fill every FMA pipe) with `isa`'s widest vectors; an FMA counts as 2
/// flops per lane. Median of 5 repetitions of about 40 ms.
Measurement fma_peak_gflops(int threads, Isa isa = host_isa());

/// Whether the CPU has AVX512-BF16 (vdpbf16ps).
bool has_avx512_bf16();
/// GFLOP/s of `threads` threads each running independent vdpbf16ps chains (16 lanes of two
/// bf16 products each: 64 flops an instruction), the peak of qkv's avx512bf16 tier; value
/// 0 and runs 0 on a CPU without AVX512-BF16. Median of 5 repetitions of about 40 ms.
Measurement bf16_dot_peak_gflops(int threads);

/// Whether the CPU has AMX-BF16 and Linux granted this process the tile state.
bool has_amx_bf16();
/// GFLOP/s of `threads` threads each running tdpbf16ps into four accumulator tiles from
/// two A and two B tiles (16 x 16 x 32 bf16 products, 16384 flops an instruction), the
/// peak of qkv's amx tier; value 0 and runs 0 without AMX-BF16. Median of 5 repetitions
/// of about 40 ms.
Measurement amx_bf16_peak_gflops(int threads);

/// GB/s (1e9 bytes) of `threads` threads summing disjoint slices of one buffer of
/// `bytes` bytes with vector loads; 0 means 8 x the last-level cache, at least 256 MiB
/// and at most 1 GiB.
/// Median of 7 passes after one warm-up pass.
Measurement read_bandwidth_gbs(int threads, std::size_t bytes = 0, Isa isa = host_isa());

} // namespace qkv::bench
