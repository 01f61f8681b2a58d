// The FMA peak and read-bandwidth loops. Each ISA's loop is its own function compiled
// for that ISA (__attribute__((target))), chosen at run time, so the library itself
// needs no -march flag and runs on any x86-64 (or other) CPU.
#include <sys/mman.h>
#include "qkv_bench/machine.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "qkv_bench/timing.hpp"

#if defined(__x86_64__)
#include <immintrin.h>
#define QKV_X86 1
#endif

// Full unrolling of the fixed-count accumulator loops: clang's spelling, GCC's own.
#if defined(__clang__)
#define QKV_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define QKV_UNROLL _Pragma("GCC unroll 16")
#else
#define QKV_UNROLL
#endif

namespace qkv::bench {

Isa host_isa() {
#if QKV_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f"))
    return Isa::Avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return Isa::Avx2;
#endif
  return Isa::Scalar;
}

std::string_view isa_name(Isa isa) {
  switch (isa) {
  case Isa::Avx512: return "avx512";
  case Isa::Avx2: return "avx2";
  case Isa::Scalar: return "scalar";
  }
  return "?";
}

int hardware_threads() { return std::max(1u, std::thread::hardware_concurrency()); }

std::size_t last_level_cache_bytes() {
  // sysfs first: it describes the cache this CPU sees (glibc's sysconf may report a
  // whole package's L3 in a virtual machine).
  for (int index = 3; index >= 2; --index) {
    std::ifstream f("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size");
    std::string s;
    if (f >> s && !s.empty()) {
      std::size_t n = std::strtoull(s.c_str(), nullptr, 10);
      char unit = s.back();
      return n * (unit == 'K' ? 1024 : unit == 'M' ? 1024 * 1024 : 1);
    }
  }
#ifdef _SC_LEVEL3_CACHE_SIZE
  long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (l3 > 0)
    return static_cast<std::size_t>(l3);
#endif
  return 32u << 20;
}

namespace {

// ---- FMA loops: `iters` rounds over independent accumulator chains; return flops ----
// The chains start from a value the compiler cannot see (a volatile), so none of them can
// be folded away (a chain that starts at the fixed point 1 of x*a+b would be).
volatile float g_chain_start = 0.5f;

#if QKV_X86
/// The sum of v's 16 lanes, through memory as the AVX2 loops do; not _mm512_reduce_add_ps,
/// which GCC 12.2's own header makes warn "'__Y' is used uninitialized" (GCC bug 105593).
__attribute__((target("avx512f"))) float lane_sum(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  float s = 0;
  for (float x : lanes)
    s += x;
  return s;
}

constexpr int kAcc512 = 16; // 2 FMA pipes x 4-cycle latency = 8 in flight; 16 to spare
__attribute__((target("avx512f"))) double fma_avx512(std::int64_t iters, float *sink) {
  float start = g_chain_start;
  __m512 a = _mm512_set1_ps(0.999f), b = _mm512_set1_ps(0.001f), acc[kAcc512];
  for (int j = 0; j < kAcc512; ++j)
    acc[j] = _mm512_set1_ps(start + 0.25f * static_cast<float>(j));
  for (std::int64_t i = 0; i < iters; ++i) {
QKV_UNROLL
    for (int j = 0; j < kAcc512; ++j)
      acc[j] = _mm512_fmadd_ps(acc[j], a, b);
  }
  for (int j = 1; j < kAcc512; ++j)
    acc[0] = _mm512_add_ps(acc[0], acc[j]);
  *sink = lane_sum(acc[0]);
  return 2.0 * 16 * kAcc512 * static_cast<double>(iters);
}

constexpr int kAcc256 = 12; // 16 ymm registers: 12 chains + 2 constants
__attribute__((target("avx2,fma"))) double fma_avx2(std::int64_t iters, float *sink) {
  float start = g_chain_start;
  __m256 a = _mm256_set1_ps(0.999f), b = _mm256_set1_ps(0.001f), acc[kAcc256];
  for (int j = 0; j < kAcc256; ++j)
    acc[j] = _mm256_set1_ps(start + 0.25f * static_cast<float>(j));
  for (std::int64_t i = 0; i < iters; ++i) {
QKV_UNROLL
    for (int j = 0; j < kAcc256; ++j)
      acc[j] = _mm256_fmadd_ps(acc[j], a, b);
  }
  for (int j = 1; j < kAcc256; ++j)
    acc[0] = _mm256_add_ps(acc[0], acc[j]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc[0]);
  float s = 0;
  for (float x : lanes)
    s += x;
  *sink = s;
  return 2.0 * 8 * kAcc256 * static_cast<double>(iters);
}
#endif

constexpr int kAccScalar = 12;
double fma_scalar(std::int64_t iters, float *sink) {
  float start = g_chain_start, a = 0.999f, b = 0.001f, acc[kAccScalar];
  for (int j = 0; j < kAccScalar; ++j)
    acc[j] = start + 0.25f * static_cast<float>(j);
  for (std::int64_t i = 0; i < iters; ++i)
    for (int j = 0; j < kAccScalar; ++j)
      acc[j] = acc[j] * a + b; // a multiply and an add: 2 flops, fused or not
  float s = 0;
  for (float x : acc)
    s += x;
  *sink = s;
  return 2.0 * kAccScalar * static_cast<double>(iters);
}

#if QKV_X86
/// vdpbf16ps chains: each instruction adds 16 lanes of two bf16 products (64 flops).
__attribute__((target("avx512f,avx512bf16"))) double dot_bf16_avx512(std::int64_t iters,
                                                                       float *sink) {
  float start = g_chain_start;
  __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f7f), b = (__m512bh)_mm512_set1_epi16(0x3a83);
  __m512 acc[kAcc512];
  for (int j = 0; j < kAcc512; ++j)
    acc[j] = _mm512_set1_ps(start + 0.25f * static_cast<float>(j));
  for (std::int64_t i = 0; i < iters; ++i) {
QKV_UNROLL
    for (int j = 0; j < kAcc512; ++j)
      acc[j] = _mm512_dpbf16_ps(acc[j], a, b);
  }
  for (int j = 1; j < kAcc512; ++j)
    acc[0] = _mm512_add_ps(acc[0], acc[j]);
  *sink = lane_sum(acc[0]);
  return 2.0 * 32 * kAcc512 * static_cast<double>(iters);
}
#endif

#if QKV_X86
/// AMX tile configuration (palette 1): tiles 0-3 are 16 x 16 f32 accumulators, 4-7 the
/// 16 x 32 bf16 operands; every tile 16 rows of 64 bytes.
struct alignas(64) TileConfig {
  std::uint8_t palette = 1, start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t colsb[16] = {};
  std::uint8_t rows[16] = {};
};

/// tdpbf16ps into four accumulators from two A and two B tiles (a 32 x 32 tile of C, as
/// qkv's AMX GEMM runs it): each instruction 16 x 16 x 32 bf16 products, 16384 flops.
__attribute__((target("amx-tile,amx-bf16"))) double dot_bf16_amx(std::int64_t iters, float *sink) {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  alignas(64) static thread_local std::uint16_t operand[16 * 32];
  alignas(64) static thread_local float out[16 * 16];
  std::fill(std::begin(operand), std::end(operand), std::uint16_t{0x3f80}); // 1.0
  _tile_loadconfig(&cfg);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, operand, 64);
  _tile_loadd(5, operand, 64);
  _tile_loadd(6, operand, 64);
  _tile_loadd(7, operand, 64);
  for (std::int64_t i = 0; i < iters; ++i) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, out, 64);
  _tile_release();
  *sink = out[0];
  return 4.0 * 16 * 16 * 32 * 2 * static_cast<double>(iters);
}

/// Whether this process may use the AMX tile state: asked of Linux once (arch_prctl
/// ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA), as qkv's runtime does before its AMX
/// kernels run.
bool amx_state_granted() {
  static const bool granted = [] {
#if defined(__linux__)
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return ::syscall(158 /* SYS_arch_prctl */, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    return false;
#endif
  }();
  return granted;
}
#endif

double fma_loop(Isa isa, std::int64_t iters, float *sink) {
#if QKV_X86
  if (isa == Isa::Avx512)
    return fma_avx512(iters, sink);
  if (isa == Isa::Avx2)
    return fma_avx2(iters, sink);
#endif
  return fma_scalar(iters, sink);
}

/// Runs fn(thread) on `threads` threads released together; returns the wall time in
/// seconds from the release to the last one finishing.
template <class F> double run_together(int threads, F &&fn) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire))
        std::this_thread::yield();
      fn(t);
    });
  while (ready.load() < threads)
    std::this_thread::yield();
  double t0 = now_ms();
  go.store(true, std::memory_order_release);
  for (auto &th : pool)
    th.join();
  return (now_ms() - t0) * 1e-3;
}

} // namespace

namespace {

/// The GFLOP/s of `loop` (iterations, sink -> flops) on `threads` threads at once: median
/// of 5 repetitions of about 40 ms.
template <class Loop> Measurement peak_of(int threads, Loop &&loop) {
  threads = std::max(threads, 1);
  std::vector<float> sinks(static_cast<std::size_t>(threads) * 16);
  // Calibrate: iterations for about 40 ms on one thread (after a warm-up that also lets
  // the clock ramp up).
  std::int64_t iters = 1 << 16;
  for (;;) {
    double t0 = now_ms();
    loop(iters, sinks.data());
    double ms = now_ms() - t0;
    if (ms >= 10 || iters >= (std::int64_t{1} << 40)) {
      iters = static_cast<std::int64_t>(static_cast<double>(iters) * 40.0 / std::max(ms, 1e-3));
      break;
    }
    iters *= 4;
  }
  std::vector<double> gflops;
  for (int rep = 0; rep < 5; ++rep) {
    std::vector<double> flops(threads);
    double s = run_together(threads, [&](int t) {
      flops[t] = loop(iters, &sinks[static_cast<std::size_t>(t) * 16]);
    });
    double total = 0;
    for (double f : flops)
      total += f;
    gflops.push_back(total / s * 1e-9);
  }
  return {median(gflops), 5};
}

} // namespace

Measurement fma_peak_gflops(int threads, Isa isa) {
  return peak_of(threads, [isa](std::int64_t iters, float *sink) { return fma_loop(isa, iters, sink); });
}

bool has_avx512_bf16() {
#if QKV_X86
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
#else
  return false;
#endif
}

Measurement bf16_dot_peak_gflops(int threads) {
#if QKV_X86
  if (has_avx512_bf16())
    return peak_of(threads, [](std::int64_t iters, float *sink) { return dot_bf16_avx512(iters, sink); });
#endif
  return {};
}

bool has_amx_bf16() {
#if QKV_X86
  __builtin_cpu_init();
  return __builtin_cpu_supports("amx-tile") && __builtin_cpu_supports("amx-bf16") &&
         amx_state_granted();
#else
  return false;
#endif
}

Measurement amx_bf16_peak_gflops(int threads) {
#if QKV_X86
  if (has_amx_bf16())
    return peak_of(threads, [](std::int64_t iters, float *sink) { return dot_bf16_amx(iters, sink); });
#endif
  return {};
}

namespace {

// ---- read loops: sum n floats (n a multiple of 128) with independent accumulators ----

#if QKV_X86
__attribute__((target("avx512f"))) float sum_avx512(const float *p, std::size_t n) {
  __m512 acc[8];
  for (auto &a : acc)
    a = _mm512_setzero_ps();
  for (std::size_t i = 0; i < n; i += 128) {
QKV_UNROLL
    for (int j = 0; j < 8; ++j)
      acc[j] = _mm512_add_ps(acc[j], _mm512_load_ps(p + i + 16 * j));
  }
  for (int j = 1; j < 8; ++j)
    acc[0] = _mm512_add_ps(acc[0], acc[j]);
  return lane_sum(acc[0]);
}

__attribute__((target("avx2"))) float sum_avx2(const float *p, std::size_t n) {
  __m256 acc[8];
  for (auto &a : acc)
    a = _mm256_setzero_ps();
  for (std::size_t i = 0; i < n; i += 64) {
QKV_UNROLL
    for (int j = 0; j < 8; ++j)
      acc[j] = _mm256_add_ps(acc[j], _mm256_load_ps(p + i + 8 * j));
  }
  for (int j = 1; j < 8; ++j)
    acc[0] = _mm256_add_ps(acc[0], acc[j]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc[0]);
  float s = 0;
  for (float x : lanes)
    s += x;
  return s;
}
#endif

float sum_scalar(const float *p, std::size_t n) {
  float acc[16] = {};
  for (std::size_t i = 0; i < n; i += 16)
    for (int j = 0; j < 16; ++j)
      acc[j] += p[i + j];
  float s = 0;
  for (float x : acc)
    s += x;
  return s;
}

float sum_loop(Isa isa, const float *p, std::size_t n) {
#if QKV_X86
  if (isa == Isa::Avx512)
    return sum_avx512(p, n);
  if (isa == Isa::Avx2)
    return sum_avx2(p, n);
#endif
  return sum_scalar(p, n);
}

struct FreeDeleter {
  void operator()(float *p) const { std::free(p); }
};

} // namespace

Measurement read_bandwidth_gbs(int threads, std::size_t bytes, Isa isa) {
  threads = std::max(threads, 1);
  if (bytes == 0)
    bytes = std::clamp<std::size_t>(8 * last_level_cache_bytes(), std::size_t{256} << 20,
                                    std::size_t{1} << 30);
  // Each thread's slice is a multiple of 128 floats (512 bytes), 64-byte aligned.
  std::size_t per_thread = (bytes / sizeof(float) / threads) / 128 * 128;
  std::size_t n = per_thread * threads;
  // On 2 MiB boundaries with transparent huge pages, as qkv's tensors of this size are
  // (runtime/lib/tensor.cpp): with 4 KiB pages the loop measures TLB misses as much as
  // memory, and reads well under what a kernel over huge pages gets.
  constexpr std::size_t kHuge = std::size_t{2} << 20;
  std::size_t alloc = (n * sizeof(float) + kHuge - 1) / kHuge * kHuge;
  std::unique_ptr<float, FreeDeleter> buf(static_cast<float *>(std::aligned_alloc(kHuge, alloc)));
  if (!buf)
    throw std::bad_alloc();
  madvise(buf.get(), alloc, MADV_HUGEPAGE); // advice: without it, 4 KiB pages
  float *p = buf.get();
  // Each thread first touches its own slice (pages land near the thread that reads them).
  run_together(threads, [&](int t) {
    for (std::size_t i = t * per_thread; i < (t + 1) * per_thread; ++i)
      p[i] = static_cast<float>(i & 7);
  });
  std::vector<float> sinks(static_cast<std::size_t>(threads) * 16);
  std::vector<double> gbs;
  for (int pass = 0; pass < 8; ++pass) {
    double s = run_together(threads, [&](int t) {
      sinks[static_cast<std::size_t>(t) * 16] = sum_loop(isa, p + t * per_thread, per_thread);
    });
    if (pass > 0) // the first pass is a warm-up
      gbs.push_back(static_cast<double>(n * sizeof(float)) / s * 1e-9);
  }
  return {median(gbs), static_cast<int>(gbs.size())};
}

} // namespace qkv::bench
