// The CUDA driver: devices, device memory, modules (PTX or cubin), streams and kernel
// launches, through the CUDA driver API. Nothing here links CUDA and no CUDA header is
// needed: the driver library (libcuda.so.1, or the file the environment variable
// QKV_LIBCUDA names) is opened with dlopen the first time anything asks for it, once per
// process, so libqkv_runtime loads, and everything else in qkv runs, on a machine without
// a GPU or a driver. available() says whether a GPU can be used, and why not.
//
// Every failing driver call is a qkv::Error naming the call and the driver's error, e.g.
// "cuMemAlloc_v2(1073741824 bytes) failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
//
// Each object keeps its device's primary context alive (a shared, reference-counted
// handle) and makes that context current on the calling thread before each driver call,
// so objects may be used from any thread, though one object not from several at once
// (like Tensor).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <optional>
#include <utility>
#include <vector>

#include <qkv/runtime/tensor.hpp>

namespace qkv::cuda {

/// Whether the driver loads, initialises (cuInit) and reports at least one device. When it
/// does not and `why` is given, *why says why: "libcuda.so.1 not found (dlopen: ...)",
/// "cuInit failed: CUDA_ERROR_NO_DEVICE (...)", "no CUDA device (libcuda.so.1 reports 0
/// devices)", or the missing symbol of a driver that lacks one. Never throws.
bool available(std::string *why = nullptr);

/// The driver library dlopen is given: the value of QKV_LIBCUDA when it is set and not
/// empty, else "libcuda.so.1". The driver is loaded once, by the first call that needs
/// it; setting QKV_LIBCUDA after that changes nothing.
std::string driver_library();

/// The number of devices the driver reports. A qkv::Error when the driver cannot be
/// loaded or initialised (the message says why).
int device_count();

/// A grid or block size, in blocks or threads per dimension.
struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

namespace detail {
struct Context;      // a retained primary context (cuda.cpp)
struct ModuleHandle; // a loaded CUmodule and its context
} // namespace detail

class Function;
class Stream;
void launch(const Function &function, Dim3 grid, Dim3 block, unsigned shared_bytes,
            const Stream &stream, void **args); // below

/// A GPU and its primary context, retained for as long as this Device, or any object made
/// on it, lives. Copies share the context.
class Device {
public:
  /// Device `ordinal` (0 .. device_count() - 1). Where there is no driver or no such
  /// device, a qkv::Error that starts with "no CUDA device" and says why.
  static Device get(int ordinal = 0);
  // Copies, never moves (a move copies): no Device is ever left without its context.
  Device(const Device &) = default;
  Device &operator=(const Device &) = default;

  int ordinal() const;
  /// What the driver calls it, e.g. "NVIDIA H200".
  const std::string &name() const;
  /// The compute capability, e.g. 9 and 0.
  int cc_major() const;
  int cc_minor() const;
  /// The compute capability as a target name: "sm_90".
  std::string arch() const;
  /// Waits for all work on the device's primary context (cuCtxSynchronize): where a
  /// kernel's own failure (a bad address, a trap) is reported.
  void synchronize() const;

private:
  explicit Device(std::shared_ptr<detail::Context> ctx);
  std::shared_ptr<detail::Context> ctx_;
  friend class Buffer;
  friend class Module;
  friend class Stream;
};

/// Device memory. Move-only; freed when destroyed. The contents start unspecified.
class Buffer {
public:
  Buffer() = default;
  /// `bytes` of device memory; 0 bytes allocates nothing (address() is 0).
  Buffer(const Device &device, std::size_t bytes);
  /// A buffer of t.nbytes() holding t's data.
  Buffer(const Device &device, const Tensor &t);
  ~Buffer();
  Buffer(Buffer &&other) noexcept;
  Buffer &operator=(Buffer &&other) noexcept;
  Buffer(const Buffer &) = delete;
  Buffer &operator=(const Buffer &) = delete;

  std::size_t bytes() const { return bytes_; }
  /// The device address (a CUdeviceptr).
  std::uint64_t address() const { return ptr_; }
  /// What a kernel argument array holds for a pointer parameter: the address of the
  /// device address. Valid while this Buffer stays where it is (not moved from).
  void *arg() { return &ptr_; }

  /// Copies `bytes` from host memory to device memory at `offset`. Synchronous.
  void upload(const void *host, std::size_t bytes, std::size_t offset = 0);
  /// Copies `bytes` at `offset` of device memory to host memory. Synchronous: waits for
  /// the work before it on the context's default stream.
  void download(void *host, std::size_t bytes, std::size_t offset = 0) const;
  /// The whole buffer from or to a tensor of exactly bytes() bytes.
  void upload(const Tensor &t);
  void download(Tensor &t) const;
  /// Sets every byte to `value` (cuMemsetD8).
  void fill(std::uint8_t value);

private:
  void check_range(const char *op, std::size_t bytes, std::size_t offset) const;
  void check_tensor(const char *op, const Tensor &t) const;
  void release() noexcept;

  std::shared_ptr<detail::Context> ctx_;
  std::uint64_t ptr_ = 0;
  std::size_t bytes_ = 0;
};

/// A kernel of a loaded module. Keeps its module loaded.
class Function {
public:
  // Copies share the module; a move copies, so no Function is ever left empty.
  Function(const Function &) = default;
  Function &operator=(const Function &) = default;
  const std::string &name() const { return name_; }
  /// The name of the module it came from.
  const std::string &module_name() const;

private:
  Function(std::shared_ptr<detail::ModuleHandle> module, void *handle, std::string name);
  std::shared_ptr<detail::ModuleHandle> module_;
  void *handle_ = nullptr; // a CUfunction
  std::string name_;
  friend class Module;
  friend void launch(const Function &, Dim3, Dim3, unsigned, const Stream &, void **);
};

/// A module loaded on a device from PTX text (which the driver compiles for the device)
/// or a cubin or fatbin image. Unloaded when it, its copies (which share it) and every
/// Function from it are gone.
class Module {
public:
  /// `name` names the module in errors (its file, the kernel it holds).
  Module(const Device &device, std::string_view image, std::string name);
  // A move copies, so no Module is ever left empty.
  Module(const Module &) = default;
  Module &operator=(const Module &) = default;

  const std::string &name() const;
  /// The kernel `name` (its mangled name for C++ kernels). A qkv::Error naming the kernel
  /// and the module when the module has none of that name.
  Function function(const std::string &name) const;

private:
  std::shared_ptr<detail::ModuleHandle> module_;
};

/// A stream: launches on one stream run in order; streams run concurrently. Move-only.
class Stream {
public:
  explicit Stream(const Device &device);
  ~Stream();
  Stream(Stream &&other) noexcept;
  Stream &operator=(Stream &&other) noexcept;
  Stream(const Stream &) = delete;
  Stream &operator=(const Stream &) = delete;

  /// Waits for everything launched on the stream; a kernel's failure surfaces here.
  void synchronize() const;
  /// The CUstream, for code that calls the driver itself.
  void *handle() const { return stream_; }

private:
  void release() noexcept;
  std::shared_ptr<detail::Context> ctx_;
  void *stream_ = nullptr; // a CUstream
  friend void launch(const Function &, Dim3, Dim3, unsigned, const Stream &, void **);
};

/// Launches `function` on `stream` (cuLaunchKernel): `grid` blocks of `block` threads,
/// `shared_bytes` of dynamic shared memory, and `args`, one pointer per kernel parameter
/// pointing at its value (Buffer::arg() for a pointer parameter; nullptr for a kernel
/// without parameters). Asynchronous: the kernel's own failures surface at the next
/// synchronize. The function and the stream must be on the same device.
void launch(const Function &function, Dim3 grid, Dim3 block, unsigned shared_bytes,
            const Stream &stream, void **args);

/// The functions compiled CUDA kernels' host code calls (MLIR's mgpu* runtime functions:
/// module loading, launches, device memory), by name, for the JIT to link against. They
/// run on device 0 and never throw: the first failure is kept until take_host_error().
const std::vector<std::pair<std::string, void *>> &host_functions();
/// The same functions by the name the host code calls and the name this library exports
/// them under (mgpu* as they are; memref.alloc's _mlir_memref_to_llvm_alloc as
/// qkv_device_alloc, ...): how code linked into a shared library (an ahead-of-time
/// bundle) finds them.
const std::vector<std::pair<std::string, std::string>> &host_function_exports();
/// The first failure of a host function since the last call, if any (and forgets it).
std::optional<std::string> take_host_error();

} // namespace qkv::cuda
