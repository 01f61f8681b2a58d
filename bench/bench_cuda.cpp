// Attention forward on an NVIDIA GPU (Target::cuda()): B*H = 32 heads of Dh = 128 at
// L = 4096 and 8192, no mask, in bf16 (the tensor-core kernel: mma.sync m16n8k16, f32
// accumulation) and in f32 (the SIMT kernel). Prints, per dtype and length, the median of
// `--repeat` runs of Kernel::run, which today includes copying q, k, v to the device and
// the output back (a run takes host tensors), so it is an end-to-end time, and the
// attention's 4*B*H*L*L*Dh flops over it as TFLOP/s and as a percentage of the H200's
// 989 TFLOP/s dense bf16 peak and 67 TFLOP/s f32 peak. Each dtype's result is checked
// against the CPU's compiled kernel of the same graph at L = 300 first (bf16: within 2e-2,
// the P tiles are rounded to bf16 on the GPU; f32: 1e-4). Without a GPU it says why and
// exits 0. tests/gpu/run.sh runs it.
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

qkv::Graph attention_graph(qkv::DType dtype) {
  qkv::Graph g(std::string("bench_cuda_attn_") + std::string(qkv::dtype_name(dtype)));
  qkv::Dim B = g.dim("B"), H = g.dim("H", 32), L = g.dim("L"), Dh = g.dim("Dh", 128);
  qkv::Value q = g.input("q", dtype, {B, H, L, Dh});
  qkv::Value k = g.input("k", dtype, {B, H, L, Dh});
  qkv::Value v = g.input("v", dtype, {B, H, L, Dh});
  g.output("out", qkv::attention(q, k, v).value());
  return g;
}

double max_abs_diff(const qkv::Tensor &a, const qkv::Tensor &b) {
  double worst = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i)
    worst = std::max(worst, std::abs(a.get(i) - b.get(i)));
  return worst;
}

/// One dtype: compile, check against the CPU at L = 300, time L = 4096 and 8192. Returns
/// whether the check passed.
bool measure(qkv::DType dtype, const std::string &arch, const std::string &device, int repeat) {
  qkv::Graph g = attention_graph(dtype);
  auto t = Clock::now();
  qkv::Kernel gpu = qkv::compile(g, qkv::Target::cuda(arch));
  double compile_ms = std::chrono::duration<double, std::milli>(Clock::now() - t).count();
  std::string name(qkv::dtype_name(dtype));
  std::printf("bench_cuda: %s (%s), %s, compile %.0f ms, B*H = 32, Dh = 128, no mask\n",
              device.c_str(), arch.c_str(), name.c_str(), compile_ms);
  double tol = dtype == qkv::DType::F32 ? 1e-4 : 2e-2;
  qkv::TensorMap small = qkv::random_inputs(g, {{"B", 1}, {"L", 300}}, 3);
  double err = max_abs_diff(gpu.run(small).at("out"), qkv::compile(g).run(small).at("out"));
  std::printf("check     L=300 against the CPU kernel: max abs diff %.3g %s\n", err,
              err < tol ? "(ok)" : "(TOO LARGE)");
  std::printf("%8s %6s %14s %10s %12s %12s\n", "L", "dtype", "run ms (med)", "TFLOP/s",
              "% bf16 peak", "% f32 peak");
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
    std::printf("%8lld %6s %14.2f %10.2f %11.2f%% %11.2f%%\n", static_cast<long long>(l),
                name.c_str(), med, tflops, 100 * tflops / 989, 100 * tflops / 67);
  }
  return err < tol;
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
  bool ok = true;
  for (qkv::DType dtype : {qkv::DType::BF16, qkv::DType::F32})
    ok = measure(dtype, arch, device.name(), repeat) && ok;
  return ok ? 0 : 1;
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
