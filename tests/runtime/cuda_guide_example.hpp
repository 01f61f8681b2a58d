// The example of docs/runtime.md's "CUDA driver" section, which must appear there verbatim
// (CudaGuide.ShowsTheExample). It runs against the fake driver (FakeCuda.GuideExample) and,
// where there is a GPU, on the GPU with tests/runtime/data/add_one.ptx (CudaDriver.ThisMachine).
#pragma once

#include <iostream>
#include <string>

#include <qkv/runtime/cuda.hpp>

namespace qkv::test {

/// Adds 1 to the first 5 of 8 floats on device 0 with add_one(float *p, int n), whose PTX
/// (or, for the fake driver, its fake module) is `ptx`; prints the device and the result.
inline void cuda_guide_example(const std::string &ptx) {
  // [doc:cuda]
  if (std::string why; !cuda::available(&why)) {
    std::cout << "no GPU: " << why << "\n";
    return;
  }
  cuda::Device gpu = cuda::Device::get(0);
  std::cout << gpu.name() << ", " << gpu.arch() << "\n";
  Tensor x = Tensor::from_f32({8}, {1, 2, 3, 4, 5, 6, 7, 8});
  cuda::Buffer buf(gpu, x);                     // allocated and uploaded
  cuda::Module module(gpu, ptx, "add_one.ptx"); // the driver compiles PTX for this GPU
  cuda::Function add_one = module.function("add_one");
  cuda::Stream stream(gpu);
  int n = 5;
  void *args[] = {buf.arg(), &n}; // one pointer per kernel parameter
  cuda::launch(add_one, {1, 1, 1}, {32, 1, 1}, 0, stream, args);
  stream.synchronize(); // a kernel's own failure surfaces here
  buf.download(x);
  std::cout << x.str(0) << "\n";
  // [/doc]
}

} // namespace qkv::test
