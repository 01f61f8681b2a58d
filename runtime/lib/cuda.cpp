// The CUDA driver layer: the driver library opened with dlopen once per process, its
// entry points resolved with dlsym, and the RAII objects of qkv/runtime/cuda.hpp over them.
// No CUDA header is included: the few handle types and the entry points' signatures are
// declared below, as the driver's ABI fixes them (cuda.h of CUDA 11 to 13), so qkv builds
// without the toolkit and libqkv_runtime never needs libcuda to load.
#include <qkv/runtime/cuda.hpp>

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <utility>

// ---- the driver ABI: cuda.h's types and the values qkv uses ---------------------------
// The opaque handle types are declared at global scope under cuda.h's names, as cuda.h
// declares them: the entry points' types are then the driver's own, to the letter (which
// UBSan's -fsanitize=function checks when the driver, like the tests' fake, is
// instrumented).
struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;

namespace qkv::cuda {

namespace {

using CUresult = int; // an enum in cuda.h; enums are passed as int
using CUdevice = int;
using CUdeviceptr = unsigned long long; // 64-bit builds of cuda.h
using CUcontext = CUctx_st *;
using CUmodule = CUmod_st *;
using CUfunction = CUfunc_st *;
using CUstream = CUstream_st *;
static_assert(sizeof(CUdeviceptr) == sizeof(std::uint64_t));

constexpr CUresult kSuccess = 0;
constexpr int kAttrComputeCapabilityMajor = 75; // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kAttrComputeCapabilityMinor = 76;

/// The entry points qkv calls, resolved from the driver library, and whether it is usable.
struct Driver {
  CUresult (*cuInit)(unsigned flags) = nullptr;
  CUresult (*cuDeviceGetCount)(int *count) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice *device, int ordinal) = nullptr;
  CUresult (*cuDeviceGetName)(char *name, int len, CUdevice device) = nullptr;
  CUresult (*cuDeviceGetAttribute)(int *value, int attribute, CUdevice device) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice device) = nullptr;
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice device) = nullptr;
  CUresult (*cuCtxSetCurrent)(CUcontext ctx) = nullptr;
  CUresult (*cuCtxSynchronize)() = nullptr;
  CUresult (*cuMemAlloc)(CUdeviceptr *ptr, std::size_t bytes) = nullptr;
  CUresult (*cuMemFree)(CUdeviceptr ptr) = nullptr;
  CUresult (*cuMemcpyHtoD)(CUdeviceptr dst, const void *src, std::size_t bytes) = nullptr;
  CUresult (*cuMemcpyDtoH)(void *dst, CUdeviceptr src, std::size_t bytes) = nullptr;
  CUresult (*cuMemsetD8)(CUdeviceptr dst, unsigned char value, std::size_t bytes) = nullptr;
  CUresult (*cuModuleLoadData)(CUmodule *module, const void *image) = nullptr;
  CUresult (*cuModuleUnload)(CUmodule module) = nullptr;
  CUresult (*cuModuleGetFunction)(CUfunction *fn, CUmodule module, const char *name) = nullptr;
  CUresult (*cuLaunchKernel)(CUfunction fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, unsigned shared_bytes, CUstream stream,
                             void **params, void **extra) = nullptr;
  CUresult (*cuStreamCreate)(CUstream *stream, unsigned flags) = nullptr;
  CUresult (*cuStreamDestroy)(CUstream stream) = nullptr;
  CUresult (*cuStreamSynchronize)(CUstream stream) = nullptr;
  CUresult (*cuGetErrorName)(CUresult error, const char **name) = nullptr;
  CUresult (*cuGetErrorString)(CUresult error, const char **text) = nullptr;

  /// The library as messages name it: "libcuda.so.1", or "<path> (QKV_LIBCUDA)".
  std::string label;
  /// Why the driver cannot be used; empty when it loaded and cuInit succeeded.
  std::string failure;
};

/// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)": the driver's own name and text for `r`.
std::string describe(const Driver &d, CUresult r) {
  const char *name = nullptr, *text = nullptr;
  if (d.cuGetErrorName(r, &name) != kSuccess || !name)
    return "CUresult " + std::to_string(r) + " (a code this driver does not name)";
  if (d.cuGetErrorString(r, &text) != kSuccess || !text)
    text = "no description";
  return std::string(name) + " (" + text + ")";
}

/// Resolves `symbol` into `fn`, or records in d.failure that the library lacks it (and
/// then resolves nothing more: the first missing symbol is the one reported).
template <class F> void resolve(Driver &d, void *lib, const char *symbol, F &fn) {
  if (!d.failure.empty())
    return;
  dlerror(); // clear an old error, so the one read below is dlsym's
  void *p = dlsym(lib, symbol);
  if (!p) {
    const char *err = dlerror();
    d.failure = d.label + " lacks " + symbol + " (dlsym: " + (err ? err : "null symbol") +
                "): not a CUDA driver, or one older than CUDA 11";
    return;
  }
  fn = reinterpret_cast<F>(p);
}

void resolve_all(Driver &d, void *lib) {
  resolve(d, lib, "cuInit", d.cuInit);
  resolve(d, lib, "cuDeviceGetCount", d.cuDeviceGetCount);
  resolve(d, lib, "cuDeviceGet", d.cuDeviceGet);
  resolve(d, lib, "cuDeviceGetName", d.cuDeviceGetName);
  resolve(d, lib, "cuDeviceGetAttribute", d.cuDeviceGetAttribute);
  resolve(d, lib, "cuDevicePrimaryCtxRetain", d.cuDevicePrimaryCtxRetain);
  // The _v2 entry points are what cuda.h has mapped the plain names to since CUDA 11 (or
  // 3.2/4.0 for memory and streams); the unversioned symbols remain for old binaries only.
  resolve(d, lib, "cuDevicePrimaryCtxRelease_v2", d.cuDevicePrimaryCtxRelease);
  resolve(d, lib, "cuCtxSetCurrent", d.cuCtxSetCurrent);
  resolve(d, lib, "cuCtxSynchronize", d.cuCtxSynchronize);
  resolve(d, lib, "cuMemAlloc_v2", d.cuMemAlloc);
  resolve(d, lib, "cuMemFree_v2", d.cuMemFree);
  resolve(d, lib, "cuMemcpyHtoD_v2", d.cuMemcpyHtoD);
  resolve(d, lib, "cuMemcpyDtoH_v2", d.cuMemcpyDtoH);
  resolve(d, lib, "cuMemsetD8_v2", d.cuMemsetD8);
  resolve(d, lib, "cuModuleLoadData", d.cuModuleLoadData);
  resolve(d, lib, "cuModuleUnload", d.cuModuleUnload);
  resolve(d, lib, "cuModuleGetFunction", d.cuModuleGetFunction);
  resolve(d, lib, "cuLaunchKernel", d.cuLaunchKernel);
  resolve(d, lib, "cuStreamCreate", d.cuStreamCreate);
  resolve(d, lib, "cuStreamDestroy_v2", d.cuStreamDestroy);
  resolve(d, lib, "cuStreamSynchronize", d.cuStreamSynchronize);
  resolve(d, lib, "cuGetErrorName", d.cuGetErrorName);
  resolve(d, lib, "cuGetErrorString", d.cuGetErrorString);
}

Driver load_driver() {
  Driver d;
  std::string path = driver_library();
  d.label = path == "libcuda.so.1" ? path : path + " (QKV_LIBCUDA)";
  // RTLD_LOCAL: the driver's symbols stay out of the global namespace, where they could
  // clash with a libcuda another library of the process links. Never dlclose'd: the
  // driver lives as long as the process, as when linked.
  void *lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *err = dlerror();
    std::string why = err ? err : "no reason given";
    bool absent = why.find("No such file") != std::string::npos;
    d.failure = d.label + (absent ? " not found" : " cannot be loaded") + " (dlopen: " + why + ")";
    return d;
  }
  resolve_all(d, lib);
  if (!d.failure.empty())
    return d;
  if (CUresult r = d.cuInit(0))
    d.failure = "cuInit failed: " + describe(d, r);
  return d;
}

/// The driver, loaded by the first caller in the process (whatever its thread). Never
/// destroyed, so objects freed at exit (static Buffers) can still call it.
const Driver &driver() {
  static std::once_flag once;
  static const Driver *loaded = nullptr;
  std::call_once(once, [] { loaded = new Driver(load_driver()); });
  return *loaded;
}

/// The driver, or a qkv::Error saying why it cannot be used.
const Driver &usable_driver() {
  const Driver &d = driver();
  if (!d.failure.empty())
    user_error(d.failure);
  return d;
}

/// Throws the error of a failed driver call: `call` names it and what it was given.
[[noreturn]] void fail(CUresult r, const std::string &call) {
  user_error(call + " failed: " + describe(driver(), r));
}

/// The devices the driver reports, or -1 with *why saying why the driver is unusable.
int probe(std::string *why) {
  const Driver &d = driver();
  if (!d.failure.empty()) {
    *why = d.failure;
    return -1;
  }
  int count = 0;
  if (CUresult r = d.cuDeviceGetCount(&count)) {
    *why = "cuDeviceGetCount failed: " + describe(d, r);
    return -1;
  }
  return count;
}

std::string num(std::size_t v) { return std::to_string(v); }

std::string dims(Dim3 d) {
  // '(' a char, not "(": g++ 12's false -Wrestrict (docs/reliability.md)
  return '(' + std::to_string(d.x) + ", " + std::to_string(d.y) + ", " + std::to_string(d.z) + ')';
}

} // namespace

// ---- contexts and modules: the shared handles objects keep alive ----------------------

namespace detail {

/// A device's primary context, retained until the last object holding it is gone.
struct Context {
  int ordinal = 0;
  CUdevice device = 0;
  CUcontext ctx = nullptr;
  bool retained = false; // the destructor releases only what was retained
  std::string name;
  int cc_major = 0, cc_minor = 0;

  Context() = default;
  Context(const Context &) = delete;
  Context &operator=(const Context &) = delete;
  // A destructor cannot report a failure; the release fails only when the driver is
  // already shutting down, and then the context goes with it.
  ~Context() {
    if (retained)
      driver().cuDevicePrimaryCtxRelease(device);
  }

  /// Makes the context current on this thread: the driver's calls act on the current
  /// context, and each thread has its own.
  void bind() const {
    if (CUresult r = driver().cuCtxSetCurrent(ctx))
      fail(r, "cuCtxSetCurrent(device " + std::to_string(ordinal) + ")");
  }
  /// bind() for destructors, which cannot throw; the release that follows then fails too,
  /// as silently.
  void bind_quietly() const noexcept { driver().cuCtxSetCurrent(ctx); }
};

struct ModuleHandle {
  std::shared_ptr<Context> ctx;
  CUmodule module = nullptr;
  std::string name;

  ModuleHandle() = default;
  ModuleHandle(const ModuleHandle &) = delete;
  ModuleHandle &operator=(const ModuleHandle &) = delete;
  ~ModuleHandle() {
    if (!module)
      return; // cuModuleLoadData failed: nothing was loaded
    ctx->bind_quietly();
    driver().cuModuleUnload(module);
  }
};

} // namespace detail

// ---- free functions ---------------------------------------------------------------------

std::string driver_library() {
  const char *env = std::getenv("QKV_LIBCUDA");
  return env && *env ? env : "libcuda.so.1";
}

bool available(std::string *why) {
  std::string reason;
  int count = probe(&reason);
  if (count == 0)
    reason = "no CUDA device (" + driver().label + " reports 0 devices)";
  if (why)
    *why = count > 0 ? "" : reason;
  return count > 0;
}

int device_count() {
  const Driver &d = usable_driver();
  int count = 0;
  if (CUresult r = d.cuDeviceGetCount(&count))
    fail(r, "cuDeviceGetCount");
  return count;
}

// ---- Device -----------------------------------------------------------------------------

Device::Device(std::shared_ptr<detail::Context> ctx) : ctx_(std::move(ctx)) {}

Device Device::get(int ordinal) {
  std::string why;
  int count = probe(&why);
  if (count < 0)
    user_error("no CUDA device: " + why);
  const Driver &d = driver();
  if (ordinal < 0 || ordinal >= count)
    user_error("no CUDA device " + std::to_string(ordinal) + " (" + d.label + " reports " +
               std::to_string(count) + (count == 1 ? " device)" : " devices)"));
  auto ctx = std::make_shared<detail::Context>();
  ctx->ordinal = ordinal;
  std::string which = "device " + std::to_string(ordinal);
  if (CUresult r = d.cuDeviceGet(&ctx->device, ordinal))
    fail(r, "cuDeviceGet(" + which + ")");
  char name[256] = {};
  if (CUresult r = d.cuDeviceGetName(name, sizeof name - 1, ctx->device))
    fail(r, "cuDeviceGetName(" + which + ")");
  ctx->name = name;
  if (CUresult r = d.cuDeviceGetAttribute(&ctx->cc_major, kAttrComputeCapabilityMajor, ctx->device))
    fail(r, "cuDeviceGetAttribute(" + which + ", compute capability major)");
  if (CUresult r = d.cuDeviceGetAttribute(&ctx->cc_minor, kAttrComputeCapabilityMinor, ctx->device))
    fail(r, "cuDeviceGetAttribute(" + which + ", compute capability minor)");
  if (CUresult r = d.cuDevicePrimaryCtxRetain(&ctx->ctx, ctx->device))
    fail(r, "cuDevicePrimaryCtxRetain(" + which + ")");
  ctx->retained = true;
  return Device(std::move(ctx));
}

int Device::ordinal() const { return ctx_->ordinal; }
const std::string &Device::name() const { return ctx_->name; }
int Device::cc_major() const { return ctx_->cc_major; }
int Device::cc_minor() const { return ctx_->cc_minor; }

std::string Device::arch() const {
  return "sm_" + std::to_string(ctx_->cc_major) + std::to_string(ctx_->cc_minor);
}

void Device::synchronize() const {
  ctx_->bind();
  if (CUresult r = driver().cuCtxSynchronize())
    fail(r, "cuCtxSynchronize(device " + std::to_string(ctx_->ordinal) + ")");
}

// ---- Buffer -----------------------------------------------------------------------------

Buffer::Buffer(const Device &device, std::size_t bytes) : ctx_(device.ctx_), bytes_(bytes) {
  if (bytes == 0)
    return; // the driver rejects 0-byte allocations; an empty tensor is no error
  ctx_->bind();
  CUdeviceptr p = 0;
  if (CUresult r = driver().cuMemAlloc(&p, bytes))
    fail(r, "cuMemAlloc_v2(" + num(bytes) + " bytes)");
  ptr_ = p;
}

Buffer::Buffer(const Device &device, const Tensor &t) : Buffer(device, t.empty() ? 0 : t.nbytes()) {
  upload(t);
}

Buffer::~Buffer() { release(); }

Buffer::Buffer(Buffer &&other) noexcept
    : ctx_(std::move(other.ctx_)), ptr_(std::exchange(other.ptr_, 0)),
      bytes_(std::exchange(other.bytes_, 0)) {}

Buffer &Buffer::operator=(Buffer &&other) noexcept {
  if (this != &other) {
    release();
    ctx_ = std::move(other.ctx_);
    ptr_ = std::exchange(other.ptr_, 0);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

// A destructor cannot report a failed free; it fails only when the context is already
// gone, and the memory with it.
void Buffer::release() noexcept {
  if (ptr_) {
    ctx_->bind_quietly();
    driver().cuMemFree(ptr_);
  }
  ptr_ = 0;
  bytes_ = 0;
}

void Buffer::check_range(const char *op, std::size_t bytes, std::size_t offset) const {
  if (offset > bytes_ || bytes > bytes_ - offset) // written so that it cannot overflow
    user_error("CUDA buffer of " + num(bytes_) + " bytes: " + op + " of " + num(bytes) +
               " bytes at offset " + num(offset) + " runs past its end");
}

void Buffer::check_tensor(const char *op, const Tensor &t) const {
  if (t.empty())
    user_error(std::string("CUDA buffer of ") + num(bytes_) + " bytes: cannot " + op +
               " an empty Tensor");
  if (t.nbytes() != bytes_)
    user_error("CUDA buffer of " + num(bytes_) + " bytes: cannot " + op + " tensor " +
               t.type_str() + " (" + num(t.nbytes()) + " bytes): the sizes differ");
}

void Buffer::upload(const void *host, std::size_t bytes, std::size_t offset) {
  check_range("upload", bytes, offset);
  if (bytes == 0)
    return;
  ctx_->bind();
  if (CUresult r = driver().cuMemcpyHtoD(ptr_ + offset, host, bytes))
    fail(r, "cuMemcpyHtoD_v2(" + num(bytes) + " bytes)");
}

void Buffer::download(void *host, std::size_t bytes, std::size_t offset) const {
  check_range("download", bytes, offset);
  if (bytes == 0)
    return;
  ctx_->bind();
  if (CUresult r = driver().cuMemcpyDtoH(host, ptr_ + offset, bytes))
    fail(r, "cuMemcpyDtoH_v2(" + num(bytes) + " bytes)");
}

void Buffer::upload(const Tensor &t) {
  check_tensor("upload", t);
  upload(t.data(), t.nbytes());
}

void Buffer::download(Tensor &t) const {
  check_tensor("download into", t);
  download(t.data(), t.nbytes());
}

void Buffer::fill(std::uint8_t value) {
  if (bytes_ == 0)
    return;
  ctx_->bind();
  if (CUresult r = driver().cuMemsetD8(ptr_, value, bytes_))
    fail(r, "cuMemsetD8_v2(" + num(bytes_) + " bytes)");
}

// ---- Module and Function ----------------------------------------------------------------

Module::Module(const Device &device, std::string_view image, std::string name) {
  if (image.empty())
    user_error("CUDA module '" + name + "': the image is empty (no PTX or cubin bytes)");
  // PTX is handed over as a NUL-terminated string, which a string_view need not be; the
  // copy ends in one (and a cubin's bytes are read by its own length).
  std::string bytes(image);
  auto handle = std::make_shared<detail::ModuleHandle>();
  handle->ctx = device.ctx_;
  handle->name = std::move(name);
  handle->ctx->bind();
  CUmodule m = nullptr;
  if (CUresult r = driver().cuModuleLoadData(&m, bytes.c_str()))
    fail(r, "cuModuleLoadData(module '" + handle->name + "', " + num(image.size()) + " bytes)");
  handle->module = m;
  module_ = std::move(handle);
}

const std::string &Module::name() const { return module_->name; }

Function Module::function(const std::string &name) const {
  module_->ctx->bind();
  CUfunction fn = nullptr;
  if (CUresult r = driver().cuModuleGetFunction(&fn, module_->module, name.c_str()))
    fail(r, "cuModuleGetFunction(kernel '" + name + "' in module '" + module_->name + "')");
  return Function(module_, fn, name);
}

Function::Function(std::shared_ptr<detail::ModuleHandle> module, void *handle, std::string name)
    : module_(std::move(module)), handle_(handle), name_(std::move(name)) {}

const std::string &Function::module_name() const { return module_->name; }

// ---- Stream -----------------------------------------------------------------------------

Stream::Stream(const Device &device) : ctx_(device.ctx_) {
  ctx_->bind();
  CUstream s = nullptr;
  // Flags 0: the stream also waits for, and is waited for by, the legacy default stream
  // that Buffer's copies use, so a copy after a launch sees the kernel's results.
  if (CUresult r = driver().cuStreamCreate(&s, 0))
    fail(r, "cuStreamCreate(device " + std::to_string(device.ordinal()) + ")");
  stream_ = s;
}

Stream::~Stream() { release(); }

Stream::Stream(Stream &&other) noexcept
    : ctx_(std::move(other.ctx_)), stream_(std::exchange(other.stream_, nullptr)) {}

Stream &Stream::operator=(Stream &&other) noexcept {
  if (this != &other) {
    release();
    ctx_ = std::move(other.ctx_);
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

void Stream::release() noexcept {
  if (stream_) {
    ctx_->bind_quietly();
    driver().cuStreamDestroy(static_cast<CUstream>(stream_));
  }
  stream_ = nullptr;
}

void Stream::synchronize() const {
  if (!stream_)
    user_error("CUDA stream: synchronize() on a stream that was moved from");
  ctx_->bind();
  if (CUresult r = driver().cuStreamSynchronize(static_cast<CUstream>(stream_)))
    fail(r, "cuStreamSynchronize");
}

// ---- launch -----------------------------------------------------------------------------

void launch(const Function &function, Dim3 grid, Dim3 block, unsigned shared_bytes,
            const Stream &stream, void **args) {
  const detail::ModuleHandle &m = *function.module_;
  std::string what = "kernel '" + function.name_ + "' in module '" + m.name + "'";
  if (!stream.stream_)
    user_error("CUDA launch of " + what + ": the stream was moved from");
  if (m.ctx->ctx != stream.ctx_->ctx)
    user_error("CUDA launch of " + what + ": the kernel is on device " +
               std::to_string(m.ctx->ordinal) + ", the stream on device " +
               std::to_string(stream.ctx_->ordinal));
  for (auto [label, d] : {std::pair{"grid", grid}, std::pair{"block", block}})
    if (d.x == 0 || d.y == 0 || d.z == 0)
      user_error("CUDA launch of " + what + ": the " + label + " " + dims(d) +
                 " has a dimension of 0");
  m.ctx->bind();
  if (CUresult r = driver().cuLaunchKernel(static_cast<CUfunction>(function.handle_), grid.x,
                                           grid.y, grid.z, block.x, block.y, block.z, shared_bytes,
                                           static_cast<CUstream>(stream.stream_), args, nullptr))
    fail(r, "cuLaunchKernel(" + what + ", grid " + dims(grid) + ", block " + dims(block) + ", " +
                std::to_string(shared_bytes) + " shared bytes)");
}

} // namespace qkv::cuda
