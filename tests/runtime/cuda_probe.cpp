// cuda_probe: what qkv::cuda makes of the driver in a fresh process, for cuda_test.cpp, which
// runs it under different QKV_LIBCUDA settings (the driver is loaded once per process, so
// each setting needs a process of its own). Prints one "key: value" line each:
//
//   available: 0 or 1        what available() returned, the same in 8 threads racing to
//   why: ...                 load the driver first (else "threads: disagree")
//   device: NAME sm_XX       Device::get(), or
//   device_error: ...        the qkv::Error it threw
//   init_calls: N            how often the fake driver's cuInit ran (with a fake only)
#include <qkv/runtime/cuda.hpp>

#include <dlfcn.h>

#include <cstdio>
#include <latch>
#include <thread>
#include <vector>

int main() {
  // The threads wait for each other, then all ask at once: the load must happen once.
  constexpr int kThreads = 8;
  std::latch start(kThreads);
  std::vector<int> answers(kThreads);
  std::vector<std::string> reasons(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      answers[i] = qkv::cuda::available(&reasons[i]);
    });
  for (auto &t : threads)
    t.join();
  for (int i = 1; i < kThreads; ++i)
    if (answers[i] != answers[0] || reasons[i] != reasons[0])
      std::printf("threads: disagree\n");
  std::printf("available: %d\nwhy: %s\n", answers[0], reasons[0].c_str());

  try {
    qkv::cuda::Device d = qkv::cuda::Device::get();
    std::printf("device: %s %s\n", d.name().c_str(), d.arch().c_str());
  } catch (const qkv::Error &e) {
    std::printf("device_error: %s\n", e.what());
  }

  // The fake driver counts its cuInit calls; RTLD_NOLOAD finds the copy qkv loaded.
  std::string path = qkv::cuda::driver_library();
  if (void *lib = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD))
    if (auto count = reinterpret_cast<int (*)(const char *)>(dlsym(lib, "fake_cuda_count")))
      std::printf("init_calls: %d\n", count("init"));
  return 0;
}
