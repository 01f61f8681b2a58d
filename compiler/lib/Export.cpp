// qkv::export_kernel: the host pipeline's objects linked into kernel.so by the system's C
// compiler driver, with the graph, the OpenMP runtime and a manifest beside it.
#include <qkv/compiler/export.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <qkv/runtime/buffer_cache.hpp>
#include <qkv/runtime/graph_json.hpp>

#include "CompileCuda.h"
#include "LibraryObjects.h"

#ifndef QKV_LLVM_LIBDIR
#define QKV_LLVM_LIBDIR "/usr/lib/llvm-22/lib"
#endif
#ifndef QKV_VERSION
#define QKV_VERSION "unknown"
#endif

extern char **environ;

namespace qkv {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

/// LLVM's names of the x86 features that add instructions, and /proc/cpuinfo's: the CPU
/// flags a bundle's code may need (BundleManifest::cpu_flags).
constexpr std::pair<const char *, const char *> kCpuFlags[] = {
    {"sse4.1", "sse4_1"},
    {"sse4.2", "sse4_2"},
    {"ssse3", "ssse3"},
    {"popcnt", "popcnt"},
    {"avx", "avx"},
    {"avx2", "avx2"},
    {"fma", "fma"},
    {"f16c", "f16c"},
    {"bmi", "bmi1"},
    {"bmi2", "bmi2"},
    {"lzcnt", "abm"},
    {"movbe", "movbe"},
    {"avx512f", "avx512f"},
    {"avx512bw", "avx512bw"},
    {"avx512cd", "avx512cd"},
    {"avx512dq", "avx512dq"},
    {"avx512vl", "avx512vl"},
    {"avx512ifma", "avx512ifma"},
    {"avx512vbmi", "avx512vbmi"},
    {"avx512vbmi2", "avx512_vbmi2"},
    {"avx512vnni", "avx512_vnni"},
    {"avx512bitalg", "avx512_bitalg"},
    {"avx512vpopcntdq", "avx512_vpopcntdq"},
    {"avx512bf16", "avx512_bf16"},
    {"avx512fp16", "avx512_fp16"},
    {"avxvnni", "avx_vnni"},
    {"gfni", "gfni"},
    {"vaes", "vaes"},
    {"vpclmulqdq", "vpclmulqdq"},
    {"amx-tile", "amx_tile"},
    {"amx-bf16", "amx_bf16"},
    {"amx-int8", "amx_int8"},
    {"amx-fp16", "amx_fp16"},
};

/// The CPU flags of kCpuFlags that an LLVM feature string ("+avx2,-amx-int8,...") turns on.
std::vector<std::string> cpu_flags_of(const std::string &features) {
  std::vector<std::string> out;
  std::stringstream in(features);
  for (std::string f; std::getline(in, f, ',');) {
    if (f.empty() || f[0] != '+')
      continue;
    for (const auto &[llvm_name, flag] : kCpuFlags)
      if (f.substr(1) == llvm_name)
        out.push_back(flag);
  }
  return out;
}

/// The folder ready for a bundle: made if missing; one that holds anything but an earlier
/// bundle is refused; an earlier bundle's manifest is removed first, so that a bundle cut
/// short by a failure has none and cannot be loaded.
void prepare_folder(const std::string &dir) {
  std::error_code ec;
  if (fs::exists(dir) && !fs::is_directory(dir))
    user_error("export: '" + dir + "' exists and is not a folder");
  if (fs::exists(dir) && !fs::is_empty(dir) && !fs::exists(fs::path(dir) / "manifest.json"))
    user_error("export: folder '" + dir +
               "' is not empty and holds no qkv bundle; give a new or empty folder");
  fs::create_directories(dir, ec);
  if (ec)
    user_error("export: cannot make folder '" + dir + "': " + ec.message());
  fs::remove(fs::path(dir) / "manifest.json", ec);
}

void write_file(const fs::path &path, const std::string &bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f.flush())
    user_error("export: cannot write '" + path.string() + "'");
}

/// The linker driver: options.linker, $QKV_LINKER, else cc, clang, gcc or clang-22 from
/// PATH (scripts/install-deps.sh installs clang-22).
std::string find_linker(const ExportOptions &options) {
  if (!options.linker.empty())
    return options.linker;
  if (const char *env = std::getenv("QKV_LINKER"); env && *env)
    return env;
  const char *path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  for (std::string d; std::getline(dirs, d, ':');)
    for (const char *cc : {"cc", "clang", "gcc", "clang-22"})
      if (!d.empty() && ::access((fs::path(d) / cc).c_str(), X_OK) == 0)
        return (fs::path(d) / cc).string();
  user_error("export: no C compiler driver (cc, clang, gcc or clang-22) on PATH to link "
             "kernel.so; "
             "install one or set QKV_LINKER");
}

/// Runs argv, its output to `log`; returns its exit status (-1 when it did not start).
int run_command(const std::vector<std::string> &argv, const fs::path &log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<char *> args;
  for (const std::string &a : argv)
    args.push_back(const_cast<char *>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0)
    return -1;
  int status = 0;
  if (::waitpid(pid, &status, 0) < 0 || !WIFEXITED(status))
    return -1;
  return WEXITSTATUS(status);
}

/// The folder of the libqkv_runtime.so loaded in this process, which kernel.so links
/// against (the process that loads the bundle has it loaded already: load_bundle is in it).
std::string runtime_library_dir() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void *>(&qkv_buffer_alloc), &info) == 0 || !info.dli_fname)
    internal_error("export: cannot find the qkv runtime library in this process");
  return fs::path(info.dli_fname).parent_path().string();
}

/// libomp copied into the bundle under the name the code's library asks for (its soname,
/// the first link of LLVM's libomp.so); returns that name.
std::string copy_openmp(const std::string &dir) {
  fs::path lib = fs::path(QKV_LLVM_LIBDIR) / "libomp.so";
  std::string name = fs::is_symlink(lib) ? fs::read_symlink(lib).filename().string() : "libomp.so";
  std::error_code ec;
  fs::copy_file(fs::canonical(lib, ec), fs::path(dir) / name, fs::copy_options::overwrite_existing,
                ec);
  if (ec)
    user_error("export: cannot copy the OpenMP runtime " + lib.string() + ": " + ec.message());
  return name;
}

/// kernel.so linked from the objects: position independent code, every symbol resolved
/// against the OpenMP runtime beside it (when `openmp` names it), qkv_runtime and libc/libm.
void link_library(const host::LibraryObjects &code, const std::string &dir,
                  const std::string &openmp, const ExportOptions &options) {
  char pattern[] = "/tmp/qkv-export-XXXXXX";
  if (!::mkdtemp(pattern))
    user_error("export: cannot make a temporary folder in /tmp");
  fs::path tmp = pattern;
  std::vector<std::string> argv = {find_linker(options), "-shared", "-o",
                                   (fs::path(dir) / "kernel.so").string()};
  for (std::size_t i = 0; i < code.objects.size(); ++i) {
    fs::path obj = tmp / ("part" + std::to_string(i) + ".o");
    write_file(obj, code.objects[i]);
    argv.push_back(obj.string());
  }
  for (const char *a : {"-Wl,--no-undefined", "-Wl,-z,now", "-Wl,-rpath,$ORIGIN"})
    argv.emplace_back(a);
  if (!openmp.empty())
    argv.push_back((fs::path(dir) / openmp).string());
  argv.push_back("-L" + runtime_library_dir());
  argv.push_back("-lqkv_runtime");
  argv.push_back("-lm");
  int rc = run_command(argv, tmp / "link.log");
  std::ifstream log(tmp / "link.log");
  std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  if (rc != 0) {
    std::string cmd;
    for (const std::string &a : argv)
      cmd += (cmd.empty() ? "" : " ") + a;
    user_error("export: linking kernel.so failed (" +
               (rc < 0 ? std::string("the linker did not run") : "exit " + std::to_string(rc)) +
               "): " + cmd + "\n" + text);
  }
}

BundleManifest::Tensor tensor_of(const std::string &name, const Node &n) {
  return {name, n.dtype, n.dims};
}

BundleManifest manifest_of(const Graph &g, const host::LibraryObjects &code, const Target &target) {
  BundleManifest m;
  m.qkv_version = QKV_VERSION;
  m.target = target.str();
  m.graph_name = g.name();
  m.symbol = code.symbol;
  m.triple = code.triple;
  m.cpu = code.cpu;
  m.cpu_flags = cpu_flags_of(code.features);
  m.isa = code.isa;
  m.matmul_precision = code.matmul_precision;
  m.checked = code.options.checked.value_or(false);
  for (NodeId id : g.arguments())
    m.arguments.push_back(tensor_of(g.node(id).name, g.node(id)));
  for (const auto &[name, id] : g.outputs())
    m.outputs.push_back(tensor_of(name, g.node(id)));
  return m;
}

/// ptxas from PATH or the CUDA toolkit's usual place; "" when there is none.
std::string find_ptxas() {
  const char *path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  std::vector<std::string> places;
  for (std::string d; std::getline(dirs, d, ':');)
    if (!d.empty())
      places.push_back(d);
  for (const char *var : {"CUDA_ROOT", "CUDA_HOME", "CUDA_PATH"})
    if (const char *v = std::getenv(var); v && *v)
      places.push_back(std::string(v) + "/bin");
  places.push_back("/usr/local/cuda/bin");
  for (const std::string &d : places)
    if (::access((fs::path(d) / "ptxas").c_str(), X_OK) == 0)
      return (fs::path(d) / "ptxas").string();
  return "";
}

/// Each kernel module assembled by ptxas for the chip, as <module>.<chip>.cubin in the
/// bundle (for cuobjdump, and so that PTX the chip cannot take fails here, not on the GPU
/// machine); the names written, none without ptxas. The bundle's code loads the PTX.
std::vector<std::string>
assemble_modules(const std::vector<std::pair<std::string, std::string>> &modules,
                 const std::string &chip, const std::string &dir) {
  std::string ptxas = find_ptxas();
  std::vector<std::string> out;
  if (ptxas.empty())
    return out;
  for (const auto &[name, ptx] : modules) {
    fs::path src = fs::path(dir) / (name + ".ptx"), log = fs::path(dir) / (name + ".ptxas.log");
    std::string cubin = name + "." + chip + ".cubin";
    write_file(src, ptx);
    int rc = run_command(
        {ptxas, "-arch=" + chip, "-o", (fs::path(dir) / cubin).string(), src.string()}, log);
    std::ifstream in(log);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::error_code ec;
    fs::remove(src, ec);
    fs::remove(log, ec);
    if (rc != 0)
      throw CompileError("ptx",
                         "ptxas -arch=" + chip + " rejects kernel module " + name + ":\n" + text);
    out.push_back(cubin);
  }
  return out;
}

/// A CUDA target's code as LibraryObjects (host code for any x86-64, kernels as PTX
/// inside it), its module loaders in the manifest, its PTX in kernels.ptx.
host::LibraryObjects cuda_code(const Graph &g, const ExportOptions &options,
                               std::vector<std::string> &inits, std::vector<std::string> &finis,
                               std::string &ptx,
                               std::vector<std::pair<std::string, std::string>> &modules) {
  auto t = Clock::now();
  g.verify();
  host::init_native_target();
  cuda_target::HostCode code =
      cuda_target::host_code(g, options.target, options.compile, /*shared_library=*/true);
  host::LibraryObjects out;
  out.symbol = code.symbol;
  out.objects = std::move(code.objects);
  out.options = options.compile;
  out.options.checked = false;
  out.triple = "x86_64-unknown-linux-gnu";
  out.cpu = cuda_target::kPortableCpu;
  inits = std::move(code.inits);
  finis = std::move(code.finis);
  ptx = std::move(code.ptx);
  modules = std::move(code.modules);
  out.ms = ms_since(t);
  return out;
}

} // namespace

ExportResult export_kernel(const Graph &g, const std::string &dir, const ExportOptions &options) {
  if (options.target.kind == Target::Kind::GpuTilesOnHost)
    user_error("export: target " + options.target.str() +
               " is a test of the CUDA kernels on the CPU; export for host-cpu or cuda");
  if (dir.empty())
    user_error("export: no folder given for the bundle");
  bool cuda = options.target.kind == Target::Kind::Cuda;
  std::vector<std::string> inits, finis;
  std::string ptx;
  std::vector<std::pair<std::string, std::string>> modules;
  if (cuda && !options.cpu.empty())
    user_error("export: ExportOptions::cpu is for Target::host(); a CUDA bundle's host code "
               "is for any x86-64 already");
  host::LibraryObjects code = cuda ? cuda_code(g, options, inits, finis, ptx, modules)
                                   : host::compile_library_objects(g, options.compile, options.cpu);
  ExportResult out;
  out.compile_ms = code.ms;
  auto t = Clock::now();
  prepare_folder(dir);
  BundleManifest m = manifest_of(g, code, options.target);
  m.inits = inits;
  m.finis = finis;
  write_file(fs::path(dir) / m.graph_file, graph_to_json(g));
  std::vector<std::string> files = {m.graph_file, m.library};
  if (cuda) {
    write_file(fs::path(dir) / "kernels.ptx", ptx);
    files.push_back("kernels.ptx");
    for (const std::string &cubin : assemble_modules(modules, options.target.chip, dir))
      files.push_back(cubin);
  } else {
    m.runtime_libraries = {copy_openmp(dir)};
    files.push_back(m.runtime_libraries[0]);
  }
  link_library(code, dir, cuda ? "" : m.runtime_libraries[0], options);
  out.link_ms = ms_since(t);
  for (const std::string &name : files)
    m.files[name] = file_sum((fs::path(dir) / name).string());
  for (const auto &[name, f] : m.files)
    out.bytes += f.bytes;
  std::string manifest = manifest_to_json(m);
  write_file(fs::path(dir) / "manifest.json", manifest);
  out.bytes += static_cast<std::int64_t>(manifest.size());
  out.manifest = std::move(m);
  return out;
}

} // namespace qkv
