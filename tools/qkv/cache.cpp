// `qkv cache`: what the kernel cache holds (info) and emptying it (clear), through
// <qkv/compiler/kernel_cache.hpp>.
#include "cache.hpp"

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include <qkv/compiler/kernel_cache.hpp>

namespace qkv::tool {

const char *const kCacheHelp =
    "usage: qkv cache info [--dir D]\n"
    "       qkv cache clear [--dir D]\n"
    "\n"
    "qkv::compile keeps each kernel it compiles as object code in the kernel cache, keyed\n"
    "by the graph, the compile options, the host CPU and qkv's build, and loads it from\n"
    "there the next time the same graph is compiled the same way (docs/compiler.md,\n"
    "\"Kernel cache\"). The folder keeps at most a cap of entries (1 GiB unless\n"
    "QKV_CACHE_MAX_MB says otherwise): after a store, the least recently used entries are\n"
    "removed down to it.\n"
    "\n"
    "  info    the folder, whether the cache is on, its entries, their total size and the\n"
    "          cap\n"
    "  clear   removes the entries (*.qkvk) and the temporary files the cache wrote in\n"
    "          the folder, nothing else\n"
    "\n"
    "options:\n"
    "  --dir D   the cache folder (default: $QKV_CACHE_DIR, else ~/.cache/qkv/kernels)\n"
    "\n"
    "environment: QKV_CACHE_DIR (the folder), QKV_CACHE=0 (no kernel is read from or\n"
    "written to the cache), QKV_CACHE_MAX_MB (the cap, in mebibytes).\n";

namespace {

std::string size_str(std::uint64_t bytes) {
  char buf[64];
  if (bytes < 1024)
    std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(bytes));
  else if (bytes < 1024 * 1024)
    std::snprintf(buf, sizeof buf, "%.1f KiB", bytes / 1024.0);
  else if (bytes < 1024 * 1024 * 1024)
    std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / (1024.0 * 1024.0));
  else
    std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

std::string folder(const cli::Args &a) {
  std::string dir = a.opts.count("dir") ? a.opts.at("dir") : kernel_cache::default_dir();
  if (dir.empty())
    user_error("qkv cache: no cache folder: set QKV_CACHE_DIR (or HOME), or pass --dir");
  return dir;
}

int cmd_info(const cli::Args &a) {
  kernel_cache::Info i = kernel_cache::info(folder(a));
  std::uint64_t cap = kernel_cache::max_bytes(); // a bad QKV_CACHE_MAX_MB fails before printing
  std::cout << "folder   " << i.dir << (i.exists ? "" : " (does not exist yet)") << "\n"
            << "status   "
            << (i.enabled ? "enabled" : "disabled by QKV_CACHE=" + std::string(std::getenv("QKV_CACHE")))
            << "\n"
            << "entries  " << i.entries << "\n"
            << "size     " << size_str(i.bytes) << "\n"
            << "cap      " << size_str(cap)
            << (std::getenv("QKV_CACHE_MAX_MB") ? " (QKV_CACHE_MAX_MB)" : "") << "\n"
            << "format   qkv " << kernel_cache::version() << "\n";
  if (i.temporary)
    std::cout << "partial  " << i.temporary
              << " temporary file(s) (writes in progress or interrupted; clear removes them)\n";
  return 0;
}

int cmd_clear(const cli::Args &a) {
  std::string dir = folder(a);
  std::uint64_t n = kernel_cache::clear(dir);
  std::cout << "removed " << n << " file(s) from " << dir << "\n";
  return 0;
}

} // namespace

int cmd_cache(const cli::Args &a) {
  cli::check_opts(a, {"dir"});
  if (a.args.size() > 1)
    user_error("qkv cache: unexpected argument '" + a.args[1] + "'");
  if (a.name == "info")
    return cmd_info(a);
  if (a.name == "clear")
    return cmd_clear(a);
  std::cerr << (a.name.empty() ? std::string("qkv cache: info or clear?")
                               : "qkv cache: unknown subcommand '" + a.name + "'")
            << "\n\n"
            << kCacheHelp;
  return 2;
}

} // namespace qkv::tool
