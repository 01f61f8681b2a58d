#include "qkv_bench/timing.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace qkv::bench {

double median(std::vector<double> v) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

namespace {
double timed(const std::function<void()> &fn) {
  double t = now_ms();
  fn();
  return now_ms() - t;
}

/// timed_ms: the timed runs so far; wall_ms: those and the warm-up.
bool want_more(const TimingPolicy &p, const std::vector<double> &ms, double timed_ms,
               double wall_ms) {
  int n = static_cast<int>(ms.size());
  if (p.runs > 0)
    return n < p.runs;
  if (n == 0)
    return true;
  if (n >= p.max_runs || (n >= p.min_runs && timed_ms >= 1e3 * p.min_seconds))
    return false;
  // Stop before a run that would end past the budget (the last run predicts the next).
  return wall_ms + ms.back() <= 1e3 * p.budget_seconds;
}
} // namespace

CpuTicks cpu_ticks() {
  std::ifstream in("/proc/stat");
  std::string line, cpu;
  CpuTicks t;
  if (!std::getline(in, line))
    return t;
  std::istringstream fields(line);
  fields >> cpu;
  std::uint64_t v = 0;
  // user nice system idle iowait irq softirq steal guest guest_nice
  for (int i = 0; fields >> v; ++i) {
    if (i < 8)
      t.total += v; // guest time is counted in user already
    if (i == 7)
      t.stolen = v;
  }
  return cpu == "cpu" ? t : CpuTicks{};
}

double steal_between(const CpuTicks &before, const CpuTicks &after) {
  if (after.total <= before.total)
    return -1;
  return static_cast<double>(after.stolen - before.stolen) /
         static_cast<double>(after.total - before.total);
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string steal_line(double steal) {
  if (steal < 0)
    return "";
  std::string line = "steal     " + fixed(100 * steal, 1) + "% of the CPU time during qkv's runs";
  if (steal > 0.05)
    line += " (the virtual machine's host took it for other guests: these times mean little)";
  return line + "\n";
}

Timing time_runs(const std::function<void()> &fn, const TimingPolicy &p) {
  CpuTicks before = cpu_ticks();
  std::vector<double> ms;
  double warm = timed(fn);
  if (warm >= 1e3 * p.slow_seconds)
    ms.push_back(warm);
  double timed_ms = ms.empty() ? 0 : warm, wall_ms = warm;
  while (want_more(p, ms, timed_ms, wall_ms)) {
    ms.push_back(timed(fn));
    timed_ms += ms.back();
    wall_ms += ms.back();
  }
  Timing t;
  t.ms = ms;
  t.runs = static_cast<int>(ms.size());
  t.median_ms = median(ms);
  t.min_ms = *std::min_element(ms.begin(), ms.end());
  t.steal = steal_between(before, cpu_ticks());
  return t;
}

void settle() { std::this_thread::sleep_for(std::chrono::milliseconds(250)); }

void parallel_for(std::int64_t n, int threads,
                  const std::function<void(std::int64_t i, int thread)> &fn) {
  int t = static_cast<int>(std::clamp<std::int64_t>(threads, 1, std::max<std::int64_t>(n, 1)));
  std::atomic<std::int64_t> next{0};
  auto work = [&](int thread) {
    for (std::int64_t i = next++; i < n; i = next++)
      fn(i, thread);
  };
  std::vector<std::thread> pool;
  for (int i = 1; i < t; ++i)
    pool.emplace_back(work, i);
  work(0);
  for (auto &th : pool)
    th.join();
}

} // namespace qkv::bench
