// Object code in and out of the JIT: what MLIR's ExecutionEngine does internally (packed
// wrappers, host target machine, code generation, linking against the process and the
// runtime libraries), split so that the object can be kept between the steps.
#include "ObjectJit.h"
#include "CodegenParts.h"
#include "DeferredSchedules.h"
#include "PerfMap.h"

#include <qkv/compiler/compile.hpp>
#include <qkv/runtime/buffer_cache.hpp>
#include <qkv/runtime/checks.hpp>
#include <qkv/runtime/kernel_abi.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "llvm/Analysis/CFG.h"
#include "llvm/BinaryFormat/Magic.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/ExecutionEngine/Orc/CompileUtils.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/MemoryBuffer.h"

#ifndef QKV_LLVM_LIBDIR
#define QKV_LLVM_LIBDIR "/usr/lib/llvm-22/lib"
#endif

namespace qkv::jit {

namespace {

/// The host, detected once: CPU name and every feature it has.
const llvm::orc::JITTargetMachineBuilder &host_builder() {
  static const llvm::orc::JITTargetMachineBuilder jtmb = [] {
    auto b = llvm::orc::JITTargetMachineBuilder::detectHost();
    if (!b)
      throw CompileError("llvm", "cannot detect the host: " + llvm::toString(b.takeError()));
    b->setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
    return std::move(*b);
  }();
  return jtmb;
}

const llvm::DataLayout &host_data_layout() {
  static const llvm::DataLayout dl = host_target_machine()->createDataLayout();
  return dl;
}

/// `_mlir_f(void **args)` for f: f(*args[0], *args[1], ...), the result (if any) stored
/// through args[n]. The same wrapper MLIR's ExecutionEngine adds.
void add_packed_wrapper(llvm::Module &m, llvm::Function &f) {
  llvm::IRBuilder<> b(m.getContext());
  auto *type = llvm::FunctionType::get(b.getVoidTy(), b.getPtrTy(), /*isVarArg=*/false);
  auto *w = llvm::cast<llvm::Function>(
      m.getOrInsertFunction(std::string(abi::kPackedPrefix) + f.getName().str(), type).getCallee());
  b.SetInsertPoint(llvm::BasicBlock::Create(m.getContext(), "", w));
  llvm::Value *list = w->arg_begin();
  llvm::SmallVector<llvm::Value *, 8> args;
  for (auto [i, arg] : llvm::enumerate(f.args())) {
    llvm::Value *slot = b.CreateGEP(b.getPtrTy(), list, b.getInt64(i));
    args.push_back(b.CreateLoad(arg.getType(), b.CreateLoad(b.getPtrTy(), slot)));
  }
  llvm::Value *result = b.CreateCall(&f, args);
  if (!result->getType()->isVoidTy()) {
    llvm::Value *slot = b.CreateGEP(b.getPtrTy(), list, b.getInt64(f.arg_size()));
    b.CreateStore(result, b.CreateLoad(b.getPtrTy(), slot));
  }
  b.CreateRetVoid();
}

/// The libraries compiled kernels call into (OpenMP's runtime, MLIR's C runner utils).
const std::vector<std::string> &runtime_libraries() {
  static const std::vector<std::string> libs = {
      std::string(QKV_LLVM_LIBDIR) + "/libmlir_c_runner_utils.so",
      std::string(QKV_LLVM_LIBDIR) + "/libomp.so"};
  return libs;
}

/// The builder's common settings. LLJIT's default linker, JITLink (MLIR's ExecutionEngine
/// uses RuntimeDyld; JITLink links MiniLM's 470 KB object in 1.5 ms instead of 2.4). Only
/// deferred parts are added as IR, so the IR compiler is one that makes its target
/// machine only when one is compiled; there is no platform (the code has no initialisers).
template <typename Builder> Builder &configure(Builder &b) {
  b.setJITTargetMachineBuilder(host_builder())
      .setDataLayout(host_data_layout())
      .setCompileFunctionCreator(
          [](llvm::orc::JITTargetMachineBuilder jtmb)
              -> llvm::Expected<std::unique_ptr<llvm::orc::IRCompileLayer::IRCompiler>> {
            return std::make_unique<llvm::orc::ConcurrentIRCompiler>(std::move(jtmb));
          })
      .setPlatformSetUp(llvm::orc::setUpInactivePlatform);
  return b;
}

/// Where a deferred part's lazy call goes when the part fails to compile: nowhere. The
/// call returns without running the body; the JIT's error reporter (make_jit) has kept
/// the error, which the kernel's caller takes after the call (LoadedObject::
/// deferred_failures) and throws, so the host program goes on. The part's IR was verified
/// with the rest of the kernel: this is an LLVM failure (out of memory, a symbol the
/// part needs and the process lacks), never a property of the user's graph.
void deferred_compile_failed() {}

/// Optimises a deferred part as compile_in_parts optimises the others, at the level the
/// part's module flag records; a deferred schedule's stub is first replaced by its code,
/// lowered from the stub's MLIR (lower_deferred_stub).
llvm::Expected<llvm::orc::ThreadSafeModule> optimize_deferred(llvm::orc::ThreadSafeModule tsm) {
  std::string error;
  std::unique_ptr<llvm::Module> lowered;
  tsm.withModuleDo([&](llvm::Module &part) {
    if (llvm::Error e = part.materializeAll()) { // its bodies, read lazily (add_deferred)
      error = llvm::toString(std::move(e));
      return;
    }
    try {
      auto tm = host_target_machine();
      lowered = lower_deferred_stub(part, *tm);
      llvm::Module &m = lowered ? *lowered : part;
      auto *level =
          llvm::mdconst::extract_or_null<llvm::ConstantInt>(m.getModuleFlag(kOptLevelFlag));
      optimize(m, level ? static_cast<int>(level->getZExtValue()) : 3, *tm);
    } catch (const std::exception &e) {
      error = e.what();
    }
  });
  if (!error.empty())
    return llvm::createStringError(error);
  if (lowered)
    return llvm::orc::ThreadSafeModule(std::move(lowered), tsm.getContext());
  return std::move(tsm);
}

/// A JIT for a kernel's objects; with `deferred`, one that also compiles deferred parts
/// (whole modules) when a call first reaches one of their functions: ORC's lazy JIT,
/// which puts a stub where each of the part's functions is, compiling the part on the
/// calling thread (the other threads of a parallel region that reach it wait); a part
/// that fails to compile is logged in `failures`.
llvm::Expected<std::unique_ptr<llvm::orc::LLJIT>> make_jit(bool deferred,
                                                           const DeferredFailures &failures) {
  if (!deferred) {
    llvm::orc::LLJITBuilder b;
    return configure(b).create();
  }
  llvm::orc::LLLazyJITBuilder b;
  configure(b).setLazyCompileFailureAddr(
      llvm::orc::ExecutorAddr::fromPtr(&deferred_compile_failed));
  auto jit = b.create();
  if (!jit)
    return jit.takeError();
  // ORC reports what goes wrong on a lazy call here (by default, to stderr) before it
  // sends the call to deferred_compile_failed.
  (*jit)->getExecutionSession().setErrorReporter(
      [failures](llvm::Error e) { failures->report(llvm::toString(std::move(e))); });
  (*jit)->setPartitionFunction(llvm::orc::IRPartitionLayer::compileWholeModule);
  (*jit)->getIRTransformLayer().setTransform(
      [](llvm::orc::ThreadSafeModule tsm, llvm::orc::MaterializationResponsibility &) {
        return optimize_deferred(std::move(tsm));
      });
  return std::unique_ptr<llvm::orc::LLJIT>(std::move(*jit));
}

/// Whether a part is LLVM bitcode (a deferred part), not an object.
bool is_bitcode(const std::string &part) {
  return llvm::identify_magic(part) == llvm::file_magic::bitcode;
}

/// Adds a deferred part's bitcode to the lazy JIT: nothing is compiled until a call
/// reaches one of its functions, and until then only the module's declarations are read
/// (its function bodies are read when optimize_deferred compiles it; reading them all
/// took most of a kernel cache hit's time).
llvm::Error add_deferred(llvm::orc::LLJIT &jit, const std::string &bitcode,
                         const std::string &name) {
  auto ctx = std::make_unique<llvm::LLVMContext>();
  auto m =
      llvm::getOwningLazyBitcodeModule(llvm::MemoryBuffer::getMemBufferCopy(bitcode, name), *ctx);
  if (!m)
    return m.takeError();
  return static_cast<llvm::orc::LLLazyJIT &>(jit).addLazyIRModule(
      llvm::orc::ThreadSafeModule(std::move(*m), std::move(ctx)));
}

} // namespace

std::unique_ptr<llvm::TargetMachine> host_target_machine(bool shared_library) {
  llvm::orc::JITTargetMachineBuilder jtmb = host_builder(); // createTargetMachine is not const
  if (shared_library) {
    jtmb.setRelocationModel(llvm::Reloc::PIC_);
    jtmb.setCodeModel(llvm::CodeModel::Small);
  }
  auto tm = jtmb.createTargetMachine();
  if (!tm)
    throw CompileError("llvm", "cannot create a target machine: " + llvm::toString(tm.takeError()));
  return std::move(*tm);
}

const std::string &host_identity() {
  static const std::string id = host_builder().getTargetTriple().str() +
                                " cpu=" + host_builder().getCPU() +
                                " features=" + host_builder().getFeatures().getString();
  return id;
}

namespace {

/// Makes internal every function with a body that the loader does not call: not a
/// C-interface entry point, not its packed wrapper (both start with `_mlir_`), not named in
/// `called_by_name`. A repeated layer's function (private in MLIR, which the translation
/// leaves external) is then internal, so that LLVM drops the arguments it never reads from
/// each of its calls (a 24-layer encoder's layer took 145 scalars per call, most of them
/// unused, and the code generator's time on a call grows with its arguments).
void internalize_callees(llvm::Module &m, const std::vector<std::string> &called_by_name) {
  for (llvm::Function &f : m) {
    if (f.isDeclaration() || f.hasLocalLinkage() || f.getName().starts_with(abi::kPackedPrefix))
      continue;
    if (std::find(called_by_name.begin(), called_by_name.end(), f.getName().str()) !=
        called_by_name.end())
      continue;
    f.setLinkage(llvm::GlobalValue::InternalLinkage);
  }
}

} // namespace

void prepare_module(llvm::Module &m, llvm::TargetMachine &tm,
                    const std::vector<std::string> &called_by_name) {
  m.setDataLayout(tm.createDataLayout());
  m.setTargetTriple(tm.getTargetTriple());
  // Only the C-interface entry points are called from outside (Kernel::run): a wrapper
  // of any other function would be compiled for nothing.
  std::vector<llvm::Function *> fns;
  for (llvm::Function &f : m)
    if (!f.isDeclaration() && !f.hasLocalLinkage() &&
        f.getName().starts_with(abi::kCInterfacePrefix))
      fns.push_back(&f);
  auto inline_into_caller = [](llvm::Function &callee) {
    callee.setLinkage(llvm::GlobalValue::InternalLinkage);
    callee.removeFnAttr(llvm::Attribute::NoInline);
    callee.addFnAttr(llvm::Attribute::AlwaysInline);
  };
  for (llvm::Function *f : fns) {
    add_packed_wrapper(m, *f);
    // The function the C interface unpacks its descriptors for is called from there only:
    // inlined, its call, which passes every memref as 5-9 scalars (thousands for a model
    // in one graph, whose layers' params are all arguments), is not compiled. The code
    // generator's time on such a call grew with the square of its arguments: 12 s of a
    // 24-layer encoder's compile.
    if (llvm::Function *inner =
            m.getFunction(f->getName().drop_front(abi::kCInterfacePrefix.size()));
        inner && !inner->isDeclaration())
      inline_into_caller(*inner);
    // The C interface itself is called by its packed wrapper only (Kernel::run and a
    // bundle's loader call the wrapper): inlined there too, its call of one pointer per
    // argument (540 for a 24-layer encoder, 534 of them on the stack, which fast
    // instruction selection leaves to SelectionDAG) and its arguments' lowering go.
    inline_into_caller(*f);
  }
  internalize_callees(m, called_by_name);
}

void DeferredFailureLog::report(std::string error) {
  std::lock_guard<std::mutex> lock(mutex_);
  errors_.push_back(std::move(error));
}

std::string DeferredFailureLog::take() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string all;
  for (const std::string &e : errors_)
    all += (all.empty() ? "" : "\n") + e;
  errors_.clear();
  return all;
}

bool has_loop(const llvm::Function &f) {
  llvm::SmallVector<std::pair<const llvm::BasicBlock *, const llvm::BasicBlock *>> back;
  llvm::FindFunctionBackedges(f, back);
  return !back.empty();
}

namespace {

/// Whether `pass` is one of the costly scalar optimisations skipped on `ir` when it is a
/// large function without loops: glue (an entry point of a model in one graph: one block of
/// thousands of loads of descriptor fields and calls), which runs once per call and is then
/// compiled unoptimised anyway (generate_glue_fast). On a 24-layer encoder's entry GVN,
/// constraint elimination and dead store elimination took 150 of the 260 ms the optimiser
/// spent there (opt-22 -time-passes, Zen 3).
bool skip_on_glue(llvm::StringRef pass, const llvm::Any &ir) {
  if (pass != "GVNPass" && pass != "ConstraintEliminationPass" && pass != "DSEPass")
    return false;
  const auto *const *f = llvm::any_cast<const llvm::Function *>(&ir);
  return f && (*f)->getInstructionCount() >= 1000 && !has_loop(**f);
}

} // namespace

void optimize(llvm::Module &m, int opt_level, llvm::TargetMachine &tm) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions tuning;
  tuning.LoopUnrolling = false;
  tuning.SLPVectorization = false;
  tuning.LoopVectorization = true;
  // CalledValuePropagation annotates indirect calls with their possible callees; a kernel
  // makes none (its OpenMP task bodies reach __kmpc_fork_call as arguments), and the pass
  // was 45% of the optimiser's time on a 24-layer encoder, growing with its entry's size.
  llvm::PassInstrumentationCallbacks callbacks;
  callbacks.registerShouldRunOptionalPassCallback([](llvm::StringRef pass, llvm::Any ir) {
    return pass != "CalledValuePropagationPass" && !skip_on_glue(pass, ir);
  });
  llvm::PassBuilder pb(&tm, tuning, std::nullopt, &callbacks);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  static const llvm::OptimizationLevel levels[] = {
      llvm::OptimizationLevel::O0, llvm::OptimizationLevel::O1, llvm::OptimizationLevel::O2,
      llvm::OptimizationLevel::O3};
  llvm::OptimizationLevel level = levels[std::clamp(opt_level, 0, 3)];
  llvm::ModulePassManager mpm = level == llvm::OptimizationLevel::O0
                                    ? pb.buildO0DefaultPipeline(level)
                                    : pb.buildPerModuleDefaultPipeline(level);
  mpm.run(m, mam);
}

llvm::Expected<std::string> emit_object(llvm::Module &m, llvm::TargetMachine &tm) {
  llvm::orc::SimpleCompiler compiler(tm);
  auto obj = compiler(m);
  if (!obj)
    return obj.takeError();
  return (*obj)->getBuffer().str();
}

namespace {

/// The runtime functions compiled code calls under MLIR's names: where memref.alloc takes
/// its memory (finalize-memref-to-llvm's generic functions: the buffer cache,
/// qkv/runtime/buffer_cache.hpp) and memref.copy's strided copies, by the name the code
/// calls and the one qkv_runtime exports.
struct RuntimeFunction {
  const char *called, *exported;
  void *address;
};
const RuntimeFunction kRenamedRuntimeFunctions[] = {
    {"_mlir_memref_to_llvm_alloc", "qkv_buffer_alloc", reinterpret_cast<void *>(&qkv_buffer_alloc)},
    {"_mlir_memref_to_llvm_aligned_alloc", "qkv_buffer_aligned_alloc",
     reinterpret_cast<void *>(&qkv_buffer_aligned_alloc)},
    {"_mlir_memref_to_llvm_free", "qkv_buffer_free", reinterpret_cast<void *>(&qkv_buffer_free)},
    // memref.copy of strided memrefs (qkv/runtime/kernel_abi.hpp)
    {"memrefCopy", "qkv_memref_copy", reinterpret_cast<void *>(&qkv_memref_copy)},
};

} // namespace

void name_runtime_functions(llvm::Module &m,
                            const std::vector<std::pair<std::string, std::string>> *names) {
  std::vector<std::pair<std::string, std::string>> host;
  for (const RuntimeFunction &f : kRenamedRuntimeFunctions)
    host.emplace_back(f.called, f.exported);
  for (const auto &[called, exported] : names ? *names : host)
    if (llvm::Function *fn = m.getFunction(called); fn && called != exported) {
      if (m.getFunction(exported))
        throw CompileError("llvm-ir",
                           "the module defines " + exported + " as well as calling " + called);
      fn->setName(exported);
    }
}

namespace {

/// Makes the runtime's libraries and own symbols visible to the objects: what checked
/// kernels call (qkv/runtime/checks.hpp), and where memref.alloc takes its memory
/// (finalize-memref-to-llvm's generic functions: the buffer cache,
/// qkv/runtime/buffer_cache.hpp). `extra` may bind them elsewhere.
llvm::Error bind_runtime(llvm::orc::LLJIT &jit,
                         const std::vector<std::pair<std::string, void *>> &extra) {
  llvm::orc::JITDylib &main = jit.getMainJITDylib();
  for (const std::string &lib : runtime_libraries()) {
    auto gen = llvm::orc::DynamicLibrarySearchGenerator::Load(
        lib.c_str(), host_data_layout().getGlobalPrefix());
    if (!gen)
      return gen.takeError();
    main.addGenerator(std::move(*gen));
  }
  llvm::orc::SymbolMap own;
  auto bind = [&](const char *name, void *address) {
    own[jit.mangleAndIntern(name)] = {llvm::orc::ExecutorAddr::fromPtr(address),
                                      llvm::JITSymbolFlags::Exported};
  };
  bind("qkv_check_failed", reinterpret_cast<void *>(&qkv_check_failed));
  for (const RuntimeFunction &f : kRenamedRuntimeFunctions)
    bind(f.called, f.address);
  for (const auto &[name, address] : extra)
    bind(name.c_str(), address);
  return main.define(llvm::orc::absoluteSymbols(std::move(own)));
}

/// The functions named, looked up in the linked objects.
llvm::Expected<std::vector<void (*)()>> functions(llvm::orc::LLJIT &jit,
                                                  const std::vector<std::string> &names) {
  std::vector<void (*)()> out;
  for (const std::string &name : names) {
    auto f = jit.lookup(name);
    if (!f)
      return f.takeError();
    out.push_back(f->toPtr<void (*)()>());
  }
  return out;
}

/// The globals a kernel may define for the loader (qkv/runtime/kernel_abi.hpp): the params
/// it takes packed (qkv-lower-matmul-to-microkernels) and what its attention kernels count
/// (qkv-lower-attention-to-flash).
void read_kernel_globals(llvm::orc::LLJIT &jit, LoadedObject &out) {
  if (auto list = jit.lookup(abi::kPackedParams))
    out.packed_params = list->toPtr<const char *>();
  else
    llvm::consumeError(list.takeError());
  auto counted = [&](const char *names, const char *counts, std::string &names_out,
                     std::int64_t *&counts_out) {
    auto n = jit.lookup(names);
    auto c = jit.lookup(counts);
    if (n && c) {
      names_out = n->toPtr<const char *>();
      counts_out = c->toPtr<std::int64_t *>();
    }
    if (!n)
      llvm::consumeError(n.takeError());
    if (!c)
      llvm::consumeError(c.takeError());
  };
  counted(abi::kSchedules, abi::kScheduleRuns, out.schedules, out.schedule_runs);
  counted(abi::kAttentions, abi::kTileCounts, out.attentions, out.tile_counts);
}

} // namespace

llvm::Expected<LoadedObject>
load_object(const std::vector<std::string> &objects, const std::string &symbol,
            const std::vector<std::pair<std::string, void *>> &extra,
            const std::vector<std::string> &inits, const std::vector<std::string> &finis) {
  bool deferred = std::any_of(objects.begin(), objects.end(), is_bitcode);
  DeferredFailures failures = deferred ? std::make_shared<DeferredFailureLog>() : nullptr;
  auto jit = make_jit(deferred, failures);
  if (!jit)
    return jit.takeError();
  add_perf_map(**jit);
  if (auto e = bind_runtime(**jit, extra))
    return e;
  for (const std::string &object : objects)
    if (auto e = is_bitcode(object)
                     ? add_deferred(**jit, object, symbol)
                     : (*jit)->addObjectFile(llvm::MemoryBuffer::getMemBufferCopy(object, symbol)))
      return e;
  auto addr = (*jit)->lookup(std::string(abi::kPackedPrefix) + symbol);
  if (!addr)
    return addr.takeError();
  auto init_fns = functions(**jit, inits);
  if (!init_fns)
    return init_fns.takeError();
  auto fini_fns = functions(**jit, finis);
  if (!fini_fns)
    return fini_fns.takeError();
  LoadedObject out;
  out.packed = addr->toPtr<void (*)(void **)>();
  out.deferred_failures = failures;
  read_kernel_globals(**jit, out);
  out.owner = std::shared_ptr<llvm::orc::LLJIT>(
      jit->release(), [finish = std::move(*fini_fns)](llvm::orc::LLJIT *j) {
        for (void (*f)() : finish)
          abi::call_generated(f);
        delete j;
      });
  for (void (*f)() : *init_fns)
    abi::call_generated(f);
  return out;
}

} // namespace qkv::jit
