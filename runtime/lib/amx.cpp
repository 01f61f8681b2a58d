#include <qkv/runtime/amx.hpp>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>

#include <qkv/dsl/error.hpp>

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace qkv {

namespace {

/// Linux's names (asm/prctl.h, the kernel's xstate numbers): not in every libc's headers.
constexpr long kArchGetXcompPerm = 0x1022;
constexpr long kArchReqXcompPerm = 0x1023;
constexpr long kXfeatureXtiledata = 18;

/// Empty when the process may use the tile data state, else why not.
std::string ask_linux() {
#if defined(__linux__) && defined(__x86_64__)
  if (::syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0)
    return std::string("arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) failed: ") +
           std::strerror(errno);
  unsigned long long granted = 0;
  if (::syscall(SYS_arch_prctl, kArchGetXcompPerm, &granted) != 0 ||
      !(granted & (1ULL << kXfeatureXtiledata)))
    return "the kernel did not grant the AMX tile data state (ARCH_GET_XCOMP_PERM)";
  return {};
#else
  return "AMX tile state is requested through Linux's arch_prctl, which this host lacks";
#endif
}

} // namespace

void request_amx_tile_state() {
  static std::once_flag once;
  static std::string refused;
  std::call_once(once, [] { refused = ask_linux(); });
  if (!refused.empty())
    user_error("the amx tier needs the CPU's AMX tile state, and " + refused +
               "; compile with CompileOptions::isa = Isa::Avx512Bf16 (QKV_ISA=avx512bf16)");
}

} // namespace qkv
