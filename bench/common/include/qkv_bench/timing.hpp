// Timing a piece of work: medians over an adaptive number of runs, and running work on
// T threads.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace qkv::bench {

/// How many times to run. With runs > 0: exactly that many timed runs. Otherwise adaptive:
/// keep running until at least min_runs runs and min_seconds have been timed, but stop
/// early (after at least one run) when the next run would end past budget_seconds.
/// Either way one untimed warm-up run comes first, unless it took at least
/// slow_seconds: then it counts as the first timed run (a run that long has no
/// warm-up effects worth a second run).
struct TimingPolicy {
  int runs = 0;
  int min_runs = 3;
  double min_seconds = 1.0;
  double budget_seconds = 10.0;
  double slow_seconds = 0.5;
  int max_runs = 1000;
};

struct Timing {
  double median_ms = 0;
  double min_ms = 0;
  int runs = 0;
  std::vector<double> ms; ///< every timed run, in order
  /// The share of the machine's CPU time the hypervisor gave to other guests while the
  /// runs (warm-up included) went on: /proc/stat's "steal", in [0, 1]; -1 where the
  /// system does not say (not Linux, or no time passed). On a shared virtual machine a
  /// few percent of it already moves a run's time.
  double steal = -1;
};

/// The machine's CPU time since boot and the part of it stolen (/proc/stat's cpu line,
/// in clock ticks), or {0, 0} where there is no /proc/stat.
struct CpuTicks {
  std::uint64_t total = 0, stolen = 0;
};
CpuTicks cpu_ticks();
/// The stolen share of the CPU time between two readings, or -1 when none passed.
double steal_between(const CpuTicks &before, const CpuTicks &after);
/// `v` with `digits` decimals ("%.*f").
std::string fixed(double v, int digits);
/// A line for the benches' text output: "steal     1.2% of the CPU time during qkv's
/// runs", with a warning past 5%; "" when `steal` is unknown (< 0).
std::string steal_line(double steal);

double median(std::vector<double> v);
/// Milliseconds on a steady clock since t0 (from now_ms()).
double now_ms();

Timing time_runs(const std::function<void()> &fn, const TimingPolicy &policy = {});

/// Sleeps long enough (250 ms) for the idle worker threads of the runtime that ran last
/// (libomp spins 200 ms by default, OpenBLAS's pthreads ~2^28 cycles) to stop spinning,
/// so that they do not take cores from the next thing measured.
void settle();

/// Calls fn(i, thread) for every i in [0, n) on `threads` threads (the caller is thread
/// 0), handing out indices one at a time; returns when all are done.
void parallel_for(std::int64_t n, int threads,
                  const std::function<void(std::int64_t i, int thread)> &fn);

} // namespace qkv::bench
