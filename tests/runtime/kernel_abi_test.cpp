// Calling into generated code: abi::call_generated, wherever the code lies, and what
// Kernel::run makes of the code's reports of parts that failed to compile.
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include <qkv/qkv.hpp>
#include <qkv/runtime/kernel.hpp>
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

// A call after which the code reports a part that failed to compile (a JIT's deferred
// attention schedule) fails with a qkv::Error naming the graph and the failure; a call
// after which it reports nothing succeeds. (The JIT's side: CodegenParts tests.)
TEST(KernelCall, ACompileFailureDuringTheCallFailsIt) {
  Graph g("lazy_parts");
  g.output("y", sigmoid(g.input("x", DType::F32, {g.dim("N")})));
  auto failures = std::make_shared<std::vector<std::string>>();
  KernelEntry entry;
  entry.packed = [](void **) {}; // writes nothing: only the report matters here
  entry.take_compile_failures = [failures] {
    std::string all = failures->empty() ? "" : failures->front();
    failures->clear();
    return all;
  };
  Kernel k(g, entry, {}, nullptr, {});
  TensorMap in{{"x", Tensor::from_values(DType::F32, {2}, {1.0, 2.0})}};
  EXPECT_NO_THROW(k.run(in));
  failures->push_back("Symbols not found: [ qkv_missing ]");
  try {
    k.run(in);
    ADD_FAILURE() << "the call should fail";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("graph 'lazy_parts'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Symbols not found: [ qkv_missing ]"), std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(k.run(in)) << "the failure was taken with the call it failed";
}

} // namespace
} // namespace qkv::abi
