// abi::call_generated: calls into generated code, wherever the code lies.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include <qkv/runtime/kernel_abi.hpp>

namespace qkv::abi {
namespace {

// A JIT may place a function at the start of a page with nothing readable before it (the
// glue object of a kernel compiled in parts is its own text section). A sanitized build's
// function-type check reads the 8 bytes before an indirect callee: it must not, here.
TEST(CallGenerated, ReachesCodeAtAPageStartAfterAnUnreadablePage) {
#if defined(__x86_64__)
  const long page = ::sysconf(_SC_PAGESIZE);
  void *map = ::mmap(nullptr, 2 * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(map, MAP_FAILED);
  unsigned char *code = static_cast<unsigned char *>(map) + page;
  ASSERT_EQ(::mprotect(code, page, PROT_READ | PROT_WRITE), 0);
  // void f(void **args) { *(int *)args[0] = 42; }
  const unsigned char body[] = {0x48, 0x8b, 0x07,                   // mov rax, [rdi]
                                0xc7, 0x00, 0x2a, 0x00, 0x00, 0x00, // mov dword [rax], 42
                                0xc3};                              // ret
  std::memcpy(code, body, sizeof body);
  ASSERT_EQ(::mprotect(code, page, PROT_READ | PROT_EXEC), 0);
  int out = 0;
  void *args[] = {&out};
  call_generated(reinterpret_cast<void (*)(void **)>(code), static_cast<void **>(args));
  EXPECT_EQ(out, 42);
  ::munmap(map, 2 * page);
#else
  GTEST_SKIP() << "skipped: the callee is x86-64 machine code";
#endif
}

} // namespace
} // namespace qkv::abi
