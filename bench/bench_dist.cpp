// Ring attention and the collectives under mpirun: what the scaling model of
// docs/distributed.md takes as inputs, measured in one run on the machine at hand.
//
//   mpirun -np 2 -x OMP_NUM_THREADS=1 build/bin/bench_dist [--seq 16384] [--heads 8]
//          [--kv-heads 8] [--head-dim 64] [--reps 3] [--causal 0|1] [--zigzag 0|1]
//
// Prints, from rank 0: each rank's compute, merge and wait time and bytes sent for one
// ring attention (medians of --reps), the ring against one process computing the whole
// attention with as many threads as one rank has, the FMA peak of one rank's threads, and
// the time of an all-reduce and of a shard exchange at several sizes (latency, bandwidth).
#include <qkv/dist/ring.hpp>
#include <qkv_bench/machine.hpp>
#include <qkv_bench/timing.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

namespace {

using namespace qkv;
using qkv::bench::median;

struct Args {
  std::int64_t seq = 16384, heads = 8, kv_heads = 8, head_dim = 64;
  int reps = 3;
  bool causal = true;
  bool zigzag = false; // RingOptions::zigzag: two chunks per rank
};

Args parse(int argc, char **argv) {
  Args a;
  std::map<std::string, std::int64_t *> ints = {{"--seq", &a.seq},
                                                {"--heads", &a.heads},
                                                {"--kv-heads", &a.kv_heads},
                                                {"--head-dim", &a.head_dim}};
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    long long v = std::atoll(argv[i + 1]);
    if (ints.count(k))
      *ints[k] = v;
    else if (k == "--reps")
      a.reps = static_cast<int>(v);
    else if (k == "--causal")
      a.causal = v != 0;
    else if (k == "--zigzag")
      a.zigzag = v != 0;
    else {
      std::fprintf(stderr, "bench_dist: unknown option %s\n", k.c_str());
      std::exit(2);
    }
  }
  return a;
}

/// Medians over the reps of one rank's ring attention, gathered on every rank (microseconds
/// and bytes).
std::vector<std::int64_t> time_ring(dist::Comm &comm, const Args &a, std::int64_t rows) {
  Tensor q = Tensor::random(DType::F32, {1, a.heads, rows, a.head_dim}, 1 + comm.rank());
  Tensor k = Tensor::random(DType::F32, {1, a.kv_heads, rows, a.head_dim}, 50 + comm.rank());
  dist::RingOptions o;
  o.causal = a.causal;
  o.zigzag = a.zigzag;
  dist::ring_attention(comm, q, k, k, o); // compiles
  std::vector<double> total, compute, merge, wait;
  dist::RingStats st;
  for (int r = 0; r < a.reps; ++r) {
    dist::ring_attention(comm, q, k, k, o, &st);
    total.push_back(st.total_s);
    compute.push_back(st.compute_s);
    merge.push_back(st.merge_s);
    wait.push_back(st.wait_s);
  }
  auto us = [](std::vector<double> v) { return static_cast<std::int64_t>(median(v) * 1e6); };
  return comm.all_gather({us(total), us(compute), us(merge), us(wait), st.bytes_sent, rows},
                         "the ring timings");
}

/// One process over the whole sequence, as many threads as a rank: rank 0 only.
double time_one_process(const Args &a) {
  Graph g("whole");
  Dim B = g.dim("B", 1), L = g.dim("L"), H = g.dim("H", a.heads),
      Hk = a.kv_heads == a.heads ? H : g.dim("Hkv", a.kv_heads), D = g.dim("Dh", a.head_dim);
  Value q = g.input("q", DType::F32, {B, H, L, D}), k = g.input("k", DType::F32, {B, Hk, L, D});
  Attention att = attention(q, k, k);
  if (a.causal)
    att.mask(causal_mask());
  g.output("o", att.value());
  Kernel kern = compile(g);
  TensorMap in{{"q", Tensor::random(DType::F32, {1, a.heads, a.seq, a.head_dim}, 1)},
               {"k", Tensor::random(DType::F32, {1, a.kv_heads, a.seq, a.head_dim}, 2)}};
  kern.run(in);
  std::vector<double> t;
  for (int r = 0; r < a.reps; ++r) {
    double t0 = qkv::bench::now_ms();
    kern.run(in);
    t.push_back(qkv::bench::now_ms() - t0);
  }
  return median(t) / 1e3;
}

/// Median seconds of f(), after one untimed call.
template <class F> double time_it(int reps, F &&f) {
  f();
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    double t0 = qkv::bench::now_ms();
    f();
    t.push_back(qkv::bench::now_ms() - t0);
  }
  return median(t) / 1e3;
}

void collectives(dist::Comm &comm, int reps) {
  if (comm.rank() == 0)
    std::printf("\n%12s  %14s  %14s  %16s\n", "bytes", "all-reduce ms", "exchange ms",
                "exchange GB/s");
  for (std::int64_t n : {1LL << 8, 1LL << 14, 1LL << 18, 1LL << 20, 1LL << 22}) {
    Tensor t = Tensor::random(DType::F32, {n}, 3), back(DType::F32, {n});
    double ar = time_it(reps * 3, [&] { comm.all_reduce_sum(t, "the benchmark's tensor"); });
    int next = (comm.rank() + 1) % comm.size(),
        prev = (comm.rank() - 1 + comm.size()) % comm.size();
    double ex = time_it(reps * 3, [&] {
      dist::Exchange x = comm.exchange({&t}, next, {&back}, prev, "the benchmark's shard");
      comm.wait(x);
    });
    if (comm.rank() == 0)
      std::printf("%12lld  %14.3f  %14.3f  %16.2f\n", static_cast<long long>(n * 4), ar * 1e3,
                  ex * 1e3, static_cast<double>(n * 4) / ex / 1e9);
  }
}

} // namespace

int main(int argc, char **argv) {
  dist::Comm comm(&argc, &argv);
  Args a = parse(argc, argv);
  int n = comm.size();
  std::int64_t rows = a.seq / n + (comm.rank() < a.seq % n ? 1 : 0);
  if (a.zigzag) {
    auto z = dist::zigzag_rows(a.seq, comm.rank(), n);
    rows = (z[0].second - z[0].first) + (z[1].second - z[1].first);
  }
  // The kernels' threads: OpenMP's, which mpirun -x OMP_NUM_THREADS sets per rank.
  const char *omp = std::getenv("OMP_NUM_THREADS");
  int threads = omp ? std::atoi(omp) : qkv::bench::hardware_threads();
  std::vector<std::int64_t> all = time_ring(comm, a, rows);
  double one = comm.rank() == 0 ? time_one_process(a) : 0;
  comm.barrier("the end of the one-process run");
  double peak = qkv::bench::fma_peak_gflops(threads).value;
  if (comm.rank() == 0) {
    std::printf("ring attention: L %lld over %d ranks, H %lld, Hkv %lld, Dh %lld, %s, %d "
                "thread(s) per rank, %s layout; FMA peak of one rank %.0f GFLOP/s\n",
                static_cast<long long>(a.seq), n, static_cast<long long>(a.heads),
                static_cast<long long>(a.kv_heads), static_cast<long long>(a.head_dim),
                a.causal ? "causal" : "not causal", threads, a.zigzag ? "zigzag" : "contiguous",
                peak);
    std::printf("%5s  %7s  %10s  %10s  %10s  %10s  %10s\n", "rank", "rows", "total ms",
                "compute ms", "merge ms", "wait ms", "sent MB");
    double slowest = 0;
    for (int r = 0; r < n; ++r) {
      const std::int64_t *x = &all[static_cast<std::size_t>(r) * 6];
      slowest = std::max(slowest, x[0] / 1e6);
      std::printf("%5d  %7lld  %10.1f  %10.1f  %10.1f  %10.1f  %10.2f\n", r,
                  static_cast<long long>(x[5]), x[0] / 1e3, x[1] / 1e3, x[2] / 1e3, x[3] / 1e3,
                  x[4] / 1e6);
    }
    double flops =
        4.0 * a.heads * a.head_dim * static_cast<double>(a.seq) * a.seq * (a.causal ? 0.5 : 1.0);
    std::printf("one process (%d thread(s)): %.1f ms; the ring (slowest rank): %.1f ms: %.2fx; "
                "%.1f GFLOP/s in all, %.0f%% of %d ranks' peak\n",
                threads, one * 1e3, slowest * 1e3, one / slowest, flops / slowest / 1e9,
                100.0 * flops / slowest / 1e9 / (peak * n), n);
  }
  collectives(comm, a.reps);
  return 0;
}
