// Attention forward on an NVIDIA GPU (Target::cuda()): B*H = 32 heads of Dh = 128 at
// L = 4096 and 8192, f32, no mask. Prints, per length, the median of `--repeat` runs of
// Kernel::run, which today includes copying q, k, v to the device and the output back
// (a run takes host tensors), so it is an end-to-end time, and the attention's
// 4*B*H*L*L*Dh flops over it as TFLOP/s and as a percentage of the H200's 989 TFLOP/s
// dense bf16 peak and 67 TFLOP/s f32 peak (qkv's kernels are f32 SIMT code today). The
// result is checked against the CPU's compiled kernel on one head's slice first. Without a
// GPU it says why and exits 0. tests/gpu/run.sh runs it.
#include <algorithm>
#include <cmath>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <qkv/compiler/compile.hpp>
#include <qkv/runtime/cuda.hpp>

namespace {

using Clock = std::chrono::steady_clock;

qkv::Graph attention_graph() {
  qkv::Graph g("bench_cuda_attn");
  qkv::Dim B = g.dim("B"), H = g.dim("H", 32), L = g.dim("L"), Dh = g.dim("Dh", 128);
  qkv::Value q = g.input("q", qkv::DType::F32, {B, H, L, Dh});
  qkv::Value k = g.input("k", qkv::DType::F32, {B, H, L, Dh});
  qkv::Value v = g.input("v", qkv::DType::F32, {B, H, L, Dh});
  g.output("out", qkv::attention(q, k, v).value());
  return g;
}

double max_abs_diff(const qkv::Tensor &a, const qkv::Tensor &b) {
  const float *x = a.data_as<float>(), *y = b.data_as<float>();
  double worst = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i)
    worst = std::max(worst, static_cast<double>(std::abs(x[i] - y[i])));
  return worst;
}

int run(int argc, char **argv) {
  int repeat = argc > 1 ? std::atoi(argv[1]) : 5;
  std::string why;
  if (!qkv::cuda::available(&why)) {
    std::printf("bench_cuda: no GPU here (%s); nothing measured\n", why.c_str());
    return 0;
  }
  qkv::cuda::Device device = qkv::cuda::Device::get(0);
  std::string arch = qkv::cuda_chip_for(device.arch());
  qkv::Graph g = attention_graph();
  auto t = Clock::now();
  qkv::Kernel gpu = qkv::compile(g, qkv::Target::cuda(arch));
  double compile_ms = std::chrono::duration<double, std::milli>(Clock::now() - t).count();
  std::printf("bench_cuda: %s (%s), compile %.0f ms, f32, B*H = 32, Dh = 128, no mask\n",
              device.name().c_str(), arch.c_str(), compile_ms);
  // Checked once at a small length against the CPU kernel.
  qkv::TensorMap small = qkv::random_inputs(g, {{"B", 1}, {"L", 300}}, 3);
  double err = max_abs_diff(gpu.run(small).at("out"), qkv::compile(g).run(small).at("out"));
  std::printf("check     L=300 against the CPU kernel: max abs diff %.3g %s\n", err,
              err < 1e-4 ? "(ok)" : "(TOO LARGE)");
  std::printf("%8s %14s %10s %12s %12s\n", "L", "run ms (med)", "TFLOP/s", "% bf16 peak",
              "% f32 peak");
  for (std::int64_t l : {4096, 8192}) {
    qkv::TensorMap in = qkv::random_inputs(g, {{"B", 1}, {"L", l}}, 1);
    gpu.run(in); // warm-up
    std::vector<double> ms;
    for (int i = 0; i < repeat; ++i) {
      t = Clock::now();
      gpu.run(in);
      ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t).count());
    }
    std::sort(ms.begin(), ms.end());
    double med = ms[ms.size() / 2];
    double tflops = 4.0 * 32 * static_cast<double>(l) * static_cast<double>(l) * 128 / (med * 1e9);
    std::printf("%8lld %14.2f %10.2f %11.2f%% %11.2f%%\n", static_cast<long long>(l), med, tflops,
                100 * tflops / 989, 100 * tflops / 67);
  }
  return err < 1e-4 ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "bench_cuda: error: %s\n", e.what());
    return 1;
  }
}
