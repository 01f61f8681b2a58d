// The functions MLIR's GPU host code calls, over qkv::cuda: what gpu-to-llvm and the
// gpu.binary translation emit (mgpuModuleLoadJIT in a module's loader, mgpuLaunchKernel,
// mgpuMemAlloc, ... ; MLIR ships them in a runtime library Debian does not package). The
// compiler links a CUDA kernel's host code against them. They run on device 0 and never
// throw, since JIT-compiled host code has no unwind tables: the first failure is kept
// for Kernel::run to raise after the call, and the calls after it do nothing.
#include <qkv/runtime/cuda.hpp>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

namespace qkv::cuda {

namespace {

struct HostState {
  std::mutex mu;
  std::string error;                                   // the first failure
  std::map<std::uint64_t, std::unique_ptr<Buffer>> buffers; // by device address
};

HostState &state() {
  static HostState s;
  return s;
}

/// A loaded module and the functions looked up in it (stable addresses for the host code).
struct HostModule {
  Module module;
  std::map<std::string, std::unique_ptr<Function>> functions;
};

/// Runs `f` on device 0 unless a call failed before; a failure is kept, not thrown.
template <class T, class F> T guarded(const char *what, F &&f) {
  HostState &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.error.empty())
    return T();
  try {
    Device device = Device::get(0); // holds the context only as long as the objects need it
    return f(device);
  } catch (const std::exception &e) {
    s.error = std::string(what) + ": " + e.what();
  }
  return T();
}

} // namespace

std::optional<std::string> take_host_error() {
  HostState &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.error.empty())
    return std::nullopt;
  std::string e = std::move(s.error);
  s.error.clear();
  return e;
}

} // namespace qkv::cuda

using namespace qkv::cuda;

extern "C" {

void *mgpuModuleLoadJIT(void *data, int /*opt_level*/) {
  return guarded<void *>("loading the kernels' PTX", [&](Device &d) -> void * {
    const char *ptx = static_cast<const char *>(data);
    return new HostModule{Module(d, std::string_view(ptx, std::strlen(ptx)), "qkv kernels"), {}};
  });
}

void mgpuModuleUnload(void *module) {
  // Not guarded: a module is freed even after a failure.
  delete static_cast<HostModule *>(module);
}

void *mgpuModuleGetFunction(void *module, const char *name) {
  return guarded<void *>("looking up a kernel", [&](Device &) -> void * {
    auto *m = static_cast<HostModule *>(module);
    if (!m)
      return nullptr;
    std::unique_ptr<Function> &f = m->functions[name];
    if (!f)
      f = std::make_unique<Function>(m->module.function(name));
    return f.get();
  });
}

void *mgpuStreamCreate() {
  return guarded<void *>("creating a stream",
                         [&](Device &d) -> void * { return new Stream(d); });
}

void mgpuStreamDestroy(void *stream) { delete static_cast<Stream *>(stream); }

void mgpuStreamSynchronize(void *stream) {
  guarded<int>("running a kernel", [&](Device &) {
    if (stream)
      static_cast<Stream *>(stream)->synchronize();
    return 0;
  });
}

void mgpuLaunchKernel(void *function, std::intptr_t gx, std::intptr_t gy, std::intptr_t gz,
                      std::intptr_t bx, std::intptr_t by, std::intptr_t bz, std::int32_t shared,
                      void *stream, void **params, void ** /*extra*/, std::size_t /*n*/) {
  guarded<int>("launching a kernel", [&](Device &) {
    if (!function || !stream)
      return 0;
    if (gx == 0 || gy == 0 || gz == 0)
      return 0; // an empty grid (a dynamic dim of 0): nothing to run
    launch(*static_cast<Function *>(function),
           Dim3{static_cast<unsigned>(gx), static_cast<unsigned>(gy), static_cast<unsigned>(gz)},
           Dim3{static_cast<unsigned>(bx), static_cast<unsigned>(by), static_cast<unsigned>(bz)},
           static_cast<unsigned>(shared), *static_cast<Stream *>(stream), params);
    return 0;
  });
}

void *mgpuMemAlloc(std::uint64_t bytes, void * /*stream*/, bool /*host_shared*/) {
  return guarded<void *>("allocating device memory", [&](Device &d) -> void * {
    auto b = std::make_unique<Buffer>(d, static_cast<std::size_t>(bytes));
    std::uint64_t at = b->address();
    if (at == 0)
      return nullptr; // 0 bytes
    state().buffers[at] = std::move(b);
    return reinterpret_cast<void *>(at);
  });
}

void mgpuMemFree(void *ptr, void * /*stream*/) {
  HostState &s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.buffers.erase(reinterpret_cast<std::uint64_t>(ptr));
}

void mgpuSetDefaultDevice(std::int32_t /*device*/) {}

// The host code's own buffers (memref.alloc, lowered with MLIR's generic allocation
// functions) are device memory: the only code that reads them is the kernels'.
void *qkv_device_alloc(std::uint64_t bytes) { return mgpuMemAlloc(bytes, nullptr, false); }
void *qkv_device_aligned_alloc(std::uint64_t /*alignment*/, std::uint64_t bytes) {
  return mgpuMemAlloc(bytes, nullptr, false); // device allocations are 256-byte aligned
}
void qkv_device_free(void *ptr) { mgpuMemFree(ptr, nullptr); }

} // extern "C"

namespace qkv::cuda {

namespace {

struct HostFunction {
  const char *called, *exported;
  void *address;
};

#define QKV_MGPU(name) {#name, #name, reinterpret_cast<void *>(&name)}
const HostFunction kHostFunctions[] = {
    QKV_MGPU(mgpuModuleLoadJIT),
    QKV_MGPU(mgpuModuleUnload),
    QKV_MGPU(mgpuModuleGetFunction),
    QKV_MGPU(mgpuStreamCreate),
    QKV_MGPU(mgpuStreamDestroy),
    QKV_MGPU(mgpuStreamSynchronize),
    QKV_MGPU(mgpuLaunchKernel),
    QKV_MGPU(mgpuMemAlloc),
    QKV_MGPU(mgpuMemFree),
    QKV_MGPU(mgpuSetDefaultDevice),
    {"_mlir_memref_to_llvm_alloc", "qkv_device_alloc", reinterpret_cast<void *>(&qkv_device_alloc)},
    {"_mlir_memref_to_llvm_aligned_alloc", "qkv_device_aligned_alloc",
     reinterpret_cast<void *>(&qkv_device_aligned_alloc)},
    {"_mlir_memref_to_llvm_free", "qkv_device_free", reinterpret_cast<void *>(&qkv_device_free)},
};
#undef QKV_MGPU

} // namespace

const std::vector<std::pair<std::string, void *>> &host_functions() {
  static const std::vector<std::pair<std::string, void *>> fns = [] {
    std::vector<std::pair<std::string, void *>> out;
    for (const HostFunction &f : kHostFunctions)
      out.emplace_back(f.called, f.address);
    return out;
  }();
  return fns;
}

const std::vector<std::pair<std::string, std::string>> &host_function_exports() {
  static const std::vector<std::pair<std::string, std::string>> names = [] {
    std::vector<std::pair<std::string, std::string>> out;
    for (const HostFunction &f : kHostFunctions)
      out.emplace_back(f.called, f.exported);
    return out;
  }();
  return names;
}

} // namespace qkv::cuda
