// The parts of a kernel's LLVM module (compiler/lib/CodegenParts.cpp, ObjectJit.cpp) on
// modules written by hand, where the compiler's own kernels give no such case. Deferred
// functions: a marked one that shares a callee with the eager code is compiled with it,
// one that calls nothing of theirs is deferred, and the loaded kernel reaches both (the
// deferred one through ORC's lazy stub, compiled on that call). Glue: loop-free entry code
// is generated unoptimised, code with a loop is not.
#include <gtest/gtest.h>

#include <string>

#include <qkv/runtime/kernel_abi.hpp>

#include "CodegenParts.h"
#include "DeferredSchedules.h"
#include "ObjectJit.h"

#include "llvm/AsmParser/Parser.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"

namespace qkv::jit {
namespace {

// The entry calls `shared` directly and both task bodies through a pointer (as a kernel's
// entry hands its OpenMP task bodies to __kmpc_fork_call): `near` calls `shared` too, so
// it is in the entry's group; `far` calls nothing with a body.
// Both are marked deferred (the attribute kDeferredAttr, which a deferred schedule's stub
// has).
constexpr const char *kModule = R"(
define internal void @shared(ptr %out, i64 %i, float %v) {
  %p = getelementptr float, ptr %out, i64 %i
  store float %v, ptr %p
  ret void
}

define internal void @near(ptr %out) #0 {
  call void @shared(ptr %out, i64 1, float 1.0)
  ret void
}

define internal void @far(ptr %out) #0 {
  %p = getelementptr float, ptr %out, i64 2
  store float 2.0, ptr %p
  ret void
}

define void @_mlir_ciface_parts(ptr %out, i1 %which) {
  call void @shared(ptr %out, i64 0, float 3.0)
  %f = select i1 %which, ptr @near, ptr @far
  call void %f(ptr %out)
  %g = select i1 %which, ptr @far, ptr @near
  call void %g(ptr %out)
  ret void
}

attributes #0 = { "qkv-deferred" }
)";

/// The module above (or `text`), prepared as a kernel's is before it is split.
std::unique_ptr<llvm::Module> prepared(llvm::LLVMContext &ctx, const std::string &text = kModule) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::SMDiagnostic err;
  std::unique_ptr<llvm::Module> m = llvm::parseAssemblyString(text, err, ctx);
  if (!m)
    ADD_FAILURE() << err.getMessage().str();
  else
    prepare_module(*m, *host_target_machine());
  return m;
}

TEST(CodegenParts, AMarkedBodyIsDeferredOnlyWithNothingTheEagerCodeCalls) {
  llvm::LLVMContext ctx;
  std::unique_ptr<llvm::Module> m = prepared(ctx);
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->getFunction("far")->hasFnAttribute(kDeferredAttr));
  std::vector<CompiledPart> parts =
      compile_in_parts(*m, 2, 3, /*keep_ir=*/false, /*shared_library=*/false, /*defer=*/true);
  std::vector<std::string> objects;
  int deferred = 0;
  for (CompiledPart &p : parts) {
    deferred += p.deferred;
    take_objects(p, objects);
  }
  EXPECT_EQ(deferred, 1) << "far alone: near shares `shared` with the entry";
  ASSERT_TRUE(parts.back().deferred) << "deferred parts come last";

  auto loaded = load_object(objects, "_mlir_ciface_parts");
  ASSERT_TRUE(static_cast<bool>(loaded)) << llvm::toString(loaded.takeError());
  for (bool which : {true, false}) {
    float out[3] = {0, 0, 0};
    float *out_ptr = out;
    void *args[] = {&out_ptr, &which};
    abi::call_generated(loaded->packed, args);
    EXPECT_EQ(out[0], 3.0f);
    EXPECT_EQ(out[1], 1.0f);
    EXPECT_EQ(out[2], 2.0f) << "the deferred body ran (compiled on its first call)";
  }
}

// A deferred part that cannot be compiled (here: it calls a function the process does not
// have, so it fails to link on its first call) must not end the host program: the call
// returns without the part's work, and the loader's log holds the error for the caller
// (Kernel::run throws it). Before, the JIT aborted the process.
TEST(CodegenParts, ADeferredPartThatFailsToCompileIsLoggedNotFatal) {
  llvm::LLVMContext ctx;
  std::string text = kModule;
  std::string store = "  store float 2.0, ptr %p\n";
  ASSERT_NE(text.find(store), std::string::npos);
  text.replace(text.find(store), store.size(),
               store + "  call void @qkv_test_no_such_function()\n");
  text += "declare void @qkv_test_no_such_function()\n";
  std::unique_ptr<llvm::Module> m = prepared(ctx, text);
  ASSERT_TRUE(m);
  std::vector<std::string> objects;
  for (CompiledPart &p : compile_in_parts(*m, 2, 3, false, false, /*defer=*/true))
    take_objects(p, objects);
  auto loaded = load_object(objects, "_mlir_ciface_parts");
  ASSERT_TRUE(static_cast<bool>(loaded)) << llvm::toString(loaded.takeError());
  ASSERT_TRUE(loaded->deferred_failures) << "a kernel with a deferred part logs its failures";
  EXPECT_EQ(loaded->deferred_failures->take(), "") << "nothing failed before a call";
  for (int call = 0; call < 2; ++call) {
    float out[3] = {0, 0, 0};
    float *out_ptr = out;
    bool which = false;
    void *args[] = {&out_ptr, &which};
    abi::call_generated(loaded->packed, args);
    EXPECT_EQ(out[0], 3.0f) << "the eager code ran";
    EXPECT_EQ(out[2], 0.0f) << "far did not run";
    // The first call's error is the link's; a later one finds the part failed already.
    std::string failure = loaded->deferred_failures->take();
    EXPECT_NE(failure.find(call == 0 ? "qkv_test_no_such_function" : "far"), std::string::npos)
        << "call " << call << ": " << failure;
    EXPECT_EQ(loaded->deferred_failures->take(), "") << "taken once";
  }
}

// A deferred attention schedule's stub (DeferredSchedules.h), called directly from the
// entry: the call does not join the stub to the entry's part (the stub is a part of its own,
// left as bitcode), and when the first call reaches it the JIT lowers its MLIR. Here that
// MLIR does not read back: the call returns without the schedule's work, and the error,
// which names the schedule, waits in the loader's log; the kernel is still usable.
TEST(CodegenParts, ADeferredScheduleIsAPartOfItsOwnAndItsFailureIsLogged) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  const char *text = R"(
declare void @qkv_deferred_schedule_3(ptr)

define void @_mlir_ciface_stubbed(ptr %out, i1 %which) {
  store float 3.0, ptr %out
  br i1 %which, label %deferred, label %done
deferred:
  call void @qkv_deferred_schedule_3(ptr %out)
  br label %done
done:
  ret void
}
)";
  llvm::LLVMContext ctx;
  llvm::SMDiagnostic err;
  std::unique_ptr<llvm::Module> m = llvm::parseAssemblyString(text, err, ctx);
  ASSERT_TRUE(m) << err.getMessage().str();
  add_deferred_stubs(*m, {{"qkv_deferred_schedule_3", "not MLIR bytecode"}}, {});
  EXPECT_TRUE(m->getFunction("qkv_deferred_schedule_3")->hasFnAttribute(kDeferredAttr));
  prepare_module(*m, *host_target_machine());
  std::vector<CompiledPart> parts = compile_in_parts(*m, 2, 3, false, false, /*defer=*/true);
  ASSERT_EQ(parts.size(), 2u) << "the entry, and the stub apart";
  EXPECT_TRUE(parts.back().deferred);
  std::vector<std::string> objects;
  for (CompiledPart &p : parts)
    take_objects(p, objects);
  auto loaded = load_object(objects, "_mlir_ciface_stubbed");
  ASSERT_TRUE(static_cast<bool>(loaded)) << llvm::toString(loaded.takeError());
  for (bool which : {false, true, false}) {
    float out = 0;
    float *out_ptr = &out;
    void *args[] = {&out_ptr, &which};
    abi::call_generated(loaded->packed, args);
    EXPECT_EQ(out, 3.0f) << "the entry ran";
    std::string failure = loaded->deferred_failures->take();
    if (which)
      EXPECT_NE(failure.find("cannot read the deferred schedule qkv_deferred_schedule_3 back"),
                std::string::npos)
          << failure;
    else
      EXPECT_EQ(failure, "") << "a call that does not reach the schedule compiles nothing";
  }
}

TEST(CodegenParts, WithoutDeferringEveryBodyIsCompiled) {
  llvm::LLVMContext ctx;
  std::unique_ptr<llvm::Module> m = prepared(ctx);
  ASSERT_TRUE(m);
  for (const CompiledPart &p : compile_in_parts(*m, 2, 3, false, false, /*defer=*/false))
    EXPECT_FALSE(p.deferred);
}

// Declarations beside the bodies (a kernel calls runtime and libm functions): grouping the
// functions must not touch them. The union-find once inserted each declaration into its map
// and then looked up a key read by reference from that map, dangling when the insertion grew
// it: ASan saw it in all-MiniLM-L6-v2 as one graph. The map grows at a few sizes only (a
// power-of-two table three quarters full), so every number of bodies up to 100 is tried.
TEST(CodegenParts, DeclarationsLeaveTheGroupsAlone) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  for (int bodies = 1; bodies <= 100; ++bodies) {
    std::string text = "declare void @external_a(ptr)\ndeclare void @external_b(ptr)\n";
    for (int i = 0; i < bodies; ++i)
      text += "define internal void @body_" + std::to_string(i) +
              "(ptr %out) noinline {\n  call void @external_a(ptr %out)\n  ret void\n}\n";
    text += "define void @_mlir_ciface_many(ptr %out) {\n";
    for (int i = 0; i < bodies; ++i)
      text += "  call void @body_" + std::to_string(i) + "(ptr %out)\n";
    text += "  call void @external_b(ptr %out)\n  ret void\n}\n";
    llvm::LLVMContext ctx;
    llvm::SMDiagnostic err;
    std::unique_ptr<llvm::Module> m = llvm::parseAssemblyString(text, err, ctx);
    ASSERT_TRUE(m) << err.getMessage().str();
    prepare_module(*m, *host_target_machine());
    EXPECT_EQ(compile_in_parts(*m, 2, 0, false, false, /*defer=*/true).size(), 1u)
        << bodies << " bodies, all called by the entry: one group";
  }
}

// The balance of the parts weighs each basic block as 100 instructions: an entry of 600
// straight-line stores (one block) and two task bodies of about 40 instructions in 11
// blocks each, reached only through pointers. By instructions alone (or with the entry at
// a quarter) the entry would outweigh both bodies and leave them to one part; weighed by
// their blocks, each body outweighs the entry and they go to different parts.
TEST(CodegenParts, BlocksWeighAsMuchAsAHundredInstructions) {
  auto body = [](const std::string &name) {
    std::string text = "define internal void @" + name + "(ptr %out, i64 %n) {\nentry:\n" +
                       "  br label %loop\nloop:\n  %i = phi i64 [ 0, %entry ], [ %next, %b8 ]\n" +
                       "  %p = getelementptr float, ptr %out, i64 %i\n  br label %b1\n";
    for (int k = 1; k <= 8; ++k)
      text += "b" + std::to_string(k) + ":\n  store volatile float 1.0, ptr %p\n" +
              (k < 8 ? "  br label %b" + std::to_string(k + 1) + "\n" : "");
    return text + "  %next = add i64 %i, 1\n  %more = icmp slt i64 %next, %n\n" +
           "  br i1 %more, label %loop, label %done\ndone:\n  ret void\n}\n";
  };
  std::string text = body("body_a") + body("body_b");
  text += "define void @_mlir_ciface_weighed(ptr %out, i1 %which) {\n";
  for (int k = 0; k < 600; ++k)
    text += "  store volatile float 2.0, ptr %out\n";
  text += "  %f = select i1 %which, ptr @body_a, ptr @body_b\n  call void %f(ptr %out, i64 4)\n"
          "  %g = select i1 %which, ptr @body_b, ptr @body_a\n  call void %g(ptr %out, i64 4)\n"
          "  ret void\n}\n";
  llvm::LLVMContext ctx;
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::SMDiagnostic err;
  std::unique_ptr<llvm::Module> m = llvm::parseAssemblyString(text, err, ctx);
  ASSERT_TRUE(m) << err.getMessage().str();
  prepare_module(*m, *host_target_machine());
  std::vector<CompiledPart> parts = compile_in_parts(*m, 2, 0, /*keep_ir=*/true);
  ASSERT_EQ(parts.size(), 2u);
  auto part_of = [&](const char *name) { // where it is defined (a declaration names no %out)
    for (std::size_t p = 0; p < parts.size(); ++p)
      if (parts[p].ir.find(std::string("@") + name + "(ptr %out") != std::string::npos)
        return static_cast<int>(p);
    return -1;
  };
  ASSERT_NE(part_of("body_a"), -1);
  ASSERT_NE(part_of("body_b"), -1);
  EXPECT_NE(part_of("body_a"), part_of("body_b"));
}

// Glue (an entry point, and what only entry points call) without a loop is generated as at
// -O0 (optnone, and apart, by the non-optimising code generator): its speed does not show,
// its code generation did. A function only the entry calls that has a loop keeps the
// optimising code generator, as does a task body.
constexpr const char *kGlue = R"(
define internal void @layer(ptr %out) noinline {
  store float 4.0, ptr %out
  ret void
}

define internal void @looped(ptr %out, i64 %n) noinline {
entry:
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %next, %loop ]
  %p = getelementptr float, ptr %out, i64 %i
  store float 5.0, ptr %p
  %next = add i64 %i, 1
  %more = icmp slt i64 %next, %n
  br i1 %more, label %loop, label %done
done:
  ret void
}

define void @_mlir_ciface_glue(ptr %out, i64 %n) {
  %tail = getelementptr float, ptr %out, i64 1
  call void @looped(ptr %tail, i64 %n)
  call void @layer(ptr %out)
  ret void
}
)";

TEST(CodegenParts, GlueWithoutLoopsIsGeneratedUnoptimised) {
  llvm::LLVMContext ctx;
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  llvm::SMDiagnostic err;
  std::unique_ptr<llvm::Module> m = llvm::parseAssemblyString(kGlue, err, ctx);
  ASSERT_TRUE(m) << err.getMessage().str();
  prepare_module(*m, *host_target_machine());
  std::vector<CompiledPart> parts = compile_in_parts(*m, 1, 3, /*keep_ir=*/false);
  ASSERT_EQ(parts.size(), 1u);
  auto fast = [&](const char *name) {
    llvm::Function *f = m->getFunction(name);
    return f && f->hasFnAttribute(llvm::Attribute::OptimizeNone);
  };
  EXPECT_EQ(m->getFunction("_mlir_ciface_glue"), nullptr)
      << "the C interface is inlined into its packed wrapper, which alone calls it";
  EXPECT_TRUE(fast("_mlir__mlir_ciface_glue")) << "the packed wrapper";
  EXPECT_TRUE(fast("layer")) << "called by the entry only, no loop";
  EXPECT_FALSE(fast("looped")) << "a loop keeps the optimising code generator";

  EXPECT_FALSE(parts[0].glue_object.empty())
      << "the glue is compiled apart, by the non-optimising code generator";
  auto loaded = load_object({parts[0].glue_object, parts[0].object}, "_mlir_ciface_glue");
  ASSERT_TRUE(static_cast<bool>(loaded)) << llvm::toString(loaded.takeError());
  float out[4] = {0, 0, 0, 0};
  float *out_ptr = out;
  std::int64_t n = 3;
  void *args[] = {&out_ptr, &n};
  abi::call_generated(loaded->packed, args);
  EXPECT_EQ(out[0], 4.0f);
  EXPECT_EQ(out[3], 5.0f);
}

} // namespace
} // namespace qkv::jit
