// qkv::compile: import, run the CPU pipeline stage by stage (keeping each stage's IR),
// JIT with MLIR's ExecutionEngine, and hand the entry point to a Kernel.
#include <qkv/compiler/compile.hpp>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <sstream>

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IRReader/IRReader.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"

#include "Import.h"
#include "qkv/compiler/transforms/Passes.h"

#ifndef QKV_LLVM_LIBDIR
#define QKV_LLVM_LIBDIR "/usr/lib/llvm-22/lib"
#endif

namespace qkv {

CompileError::CompileError(std::string stage, std::string diagnostics)
    : Error("compile failed at stage '" + stage + "':\n" + diagnostics), stage_(std::move(stage)),
      diagnostics_(std::move(diagnostics)) {}

std::string cpu_stage_pipeline(const std::string &stage) {
  return cpu_stage_pipeline(stage, Schedule{});
}

int host_vector_bits() {
  auto features = llvm::sys::getHostCPUFeatures();
  auto has = [&](const char *f) { return features.lookup(f); };
  if (has("avx512f"))
    return 512;
  if (has("avx2") && has("fma"))
    return 256;
  return 128;
}

namespace {

ir::CpuPipelineOptions pipeline_options(const Schedule &s) {
  if (s.threads < 0)
    user_error("Schedule::threads must be 0 (all cores) or positive, got " +
               std::to_string(s.threads));
  if (s.q_tile < 0 || s.kv_tile < 0)
    user_error("Schedule: tile sizes must be 0 (default) or positive");
  if (s.vector_bits != 0 && s.vector_bits != 128 && s.vector_bits != 256 && s.vector_bits != 512)
    user_error("Schedule::vector_bits must be 0 (the host's widest), 128, 256 or 512, got " +
               std::to_string(s.vector_bits));
  ir::CpuPipelineOptions o;
  o.vectorBits = s.vector_bits ? s.vector_bits : host_vector_bits();
  o.qTile = s.q_tile;
  o.kvTile = s.kv_tile;
  o.threads = s.threads;
  return o;
}

} // namespace

std::string cpu_stage_pipeline(const std::string &stage, const Schedule &schedule) {
  std::string p = ir::cpuStagePipeline(stage, pipeline_options(schedule));
  if (p.empty())
    user_error("unknown CPU pipeline stage '" + stage + "' (qkv, linalg, loops, llvm)");
  return p;
}

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

void init_llvm() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    ir::registerUpstreamPassesUsedByQkv();
    ir::registerQkvPassesAndPipelines();
  });
}

std::string print_module(mlir::ModuleOp m) {
  std::string s;
  llvm::raw_string_ostream os(s);
  m.print(os);
  return s;
}

/// The stages QKV_DUMP and options.dump ask for ("all" means every stage).
std::vector<std::string> dump_list(const CompileOptions &o) {
  std::vector<std::string> out = o.dump;
  if (const char *env = std::getenv("QKV_DUMP")) {
    std::stringstream ss(env);
    std::string s;
    while (std::getline(ss, s, ','))
      if (!s.empty())
        out.push_back(s);
  }
  for (const auto &s : out) {
    if (s == "all")
      return Kernel::stage_names();
    const auto &names = Kernel::stage_names();
    if (std::find(names.begin(), names.end(), s) == names.end())
      user_error("QKV_DUMP: unknown stage '" + s +
                 "' (graph, qkv, linalg, loops, llvm, "
                 "llvm-ir, asm, all)");
  }
  return out;
}

std::unique_ptr<llvm::TargetMachine> host_target_machine() {
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb)
    throw CompileError("llvm", "cannot detect the host: " + llvm::toString(jtmb.takeError()));
  jtmb->setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  auto tm = jtmb->createTargetMachine();
  if (!tm)
    throw CompileError("llvm", "cannot create a target machine: " + llvm::toString(tm.takeError()));
  return std::move(*tm);
}

/// Assembly for the host from LLVM IR text (the optimised module the JIT ran).
std::string emit_asm(const std::string &ir_text) {
  llvm::LLVMContext ctx;
  llvm::SMDiagnostic err;
  auto mod = llvm::parseIR(llvm::MemoryBufferRef(ir_text, "qkv"), err, ctx);
  if (!mod)
    throw CompileError("asm", "cannot re-read the LLVM IR: " + err.getMessage().str());
  auto tm = host_target_machine();
  mod->setDataLayout(tm->createDataLayout());
  mod->setTargetTriple(tm->getTargetTriple());
  llvm::SmallString<0> buf;
  llvm::raw_svector_ostream os(buf);
  llvm::legacy::PassManager pm;
  if (tm->addPassesToEmitFile(pm, os, nullptr, llvm::CodeGenFileType::AssemblyFile))
    throw CompileError("asm", "the target cannot emit assembly");
  pm.run(*mod);
  return std::string(buf.str());
}

/// An ExecutionEngine for `module` (in the LLVM dialect): optimised at `opt_level` for the
/// host CPU at the schedule's vector width, with libomp loaded for the parallel loops.
/// `llvm_ir` receives the optimised module's text.
std::shared_ptr<mlir::ExecutionEngine> jit(mlir::ModuleOp module, int opt_level,
                                           int64_t vector_bits, std::string &llvm_ir,
                                           const std::string &diags) {
  auto tm = host_target_machine();
  auto optimize = mlir::makeOptimizingTransformer(static_cast<unsigned>(opt_level), 0, tm.get());
  // ExecutionEngineOptions::transformer is a function_ref: the callable must outlive it.
  std::function<llvm::Error(llvm::Module *)> transform = [&](llvm::Module *m) -> llvm::Error {
    // Code for the host CPU at the schedule's vector width (LLVM otherwise keeps to
    // 256-bit vectors on some AVX-512 machines).
    std::string cpu = llvm::sys::getHostCPUName().str(),
                features = tm->getTargetFeatureString().str();
    for (llvm::Function &f : *m) {
      if (f.isDeclaration())
        continue;
      f.addFnAttr("target-cpu", cpu);
      f.addFnAttr("target-features", features);
      f.addFnAttr("prefer-vector-width", std::to_string(vector_bits));
      f.addFnAttr("min-legal-vector-width", std::to_string(vector_bits));
    }
    if (auto e = optimize(m))
      return e;
    llvm::raw_string_ostream os(llvm_ir);
    m->print(os, nullptr);
    return llvm::Error::success();
  };
  mlir::ExecutionEngineOptions eo;
  eo.transformer = transform;
  eo.jitCodeGenOptLevel = llvm::CodeGenOptLevel::Aggressive;
  static const std::string runner_utils =
      std::string(QKV_LLVM_LIBDIR) + "/libmlir_c_runner_utils.so";
  static const std::string omp = std::string(QKV_LLVM_LIBDIR) + "/libomp.so";
  llvm::SmallVector<llvm::StringRef> libs{runner_utils, omp};
  eo.sharedLibPaths = libs;
  auto engine = mlir::ExecutionEngine::create(module, eo);
  if (!engine)
    throw CompileError("llvm-ir", llvm::toString(engine.takeError()) + "\n" + diags);
  std::shared_ptr<mlir::ExecutionEngine> eng(std::move(*engine));
  eng->initialize();
  return eng;
}

} // namespace

Kernel compile(const Graph &g, const Target &target, const CompileOptions &options) {
  (void)target; // one target so far
  auto t_all = Clock::now();
  init_llvm();
  g.verify();
  std::vector<std::string> dump = dump_list(options);
  auto wants = [&](const std::string &s) {
    return std::find(dump.begin(), dump.end(), s) != dump.end();
  };
  std::vector<std::pair<std::string, std::string>> stages;
  CompileStats stats;
  auto keep = [&](const std::string &stage, std::string text, double ms) {
    if (wants(stage))
      std::cerr << "// ===== qkv stage '" << stage << "' of graph '" << g.name() << "' =====\n"
                << text << (text.empty() || text.back() == '\n' ? "" : "\n");
    stages.emplace_back(stage, std::move(text));
    stats.stage_ms.emplace_back(stage, ms);
  };
  keep("graph", g.str(), 0);
  ir::CpuPipelineOptions popts = pipeline_options(options.schedule);

  mlir::DialectRegistry registry;
  ir::registerQkvDialects(registry);
  auto ctx = std::make_shared<mlir::MLIRContext>(registry, mlir::MLIRContext::Threading::DISABLED);
  ctx->loadAllAvailableDialects();

  // Collect diagnostics so failures carry them instead of going to stderr.
  std::string diags;
  mlir::ScopedDiagnosticHandler handler(ctx.get(), [&](mlir::Diagnostic &d) {
    llvm::raw_string_ostream os(diags);
    os << d.getLocation() << ": " << d << "\n";
    for (auto &note : d.getNotes())
      os << "  note: " << note << "\n";
    return mlir::success();
  });

  auto t = Clock::now();
  mlir::OwningOpRef<mlir::ModuleOp> module = ir::import_graph(*ctx, g);
  double import_ms = ms_since(t);

  for (const char *stage : {"qkv", "linalg", "loops", "llvm"}) {
    t = Clock::now();
    mlir::PassManager pm(ctx.get());
    std::string pipeline = ir::cpuStagePipeline(stage, popts);
    if (std::string(stage) == "qkv" && !options.recognize_attention)
      pipeline = "canonicalize,cse";
    if (mlir::failed(mlir::parsePassPipeline(pipeline, pm)))
      throw CompileError(stage, "bad pass pipeline: " + pipeline + "\n" + diags);
    if (mlir::failed(pm.run(*module)))
      throw CompileError(stage, diags.empty() ? "a pass failed without a diagnostic" : diags);
    keep(stage, print_module(*module), ms_since(t) + (std::string(stage) == "qkv" ? import_ms : 0));
  }

  // JIT, keeping the optimised LLVM IR's text.
  t = Clock::now();
  auto llvm_ir = std::make_shared<std::string>();
  std::shared_ptr<mlir::ExecutionEngine> eng =
      jit(*module, options.opt_level, popts.vectorBits, *llvm_ir, diags);
  std::string symbol = "_mlir_ciface_" + ir::function_name(g);
  auto fn = eng->lookupPacked(symbol);
  if (!fn)
    throw CompileError("llvm-ir",
                       "no entry point " + symbol + ": " + llvm::toString(fn.takeError()));
  keep("llvm-ir", *llvm_ir, ms_since(t));
  stats.total_ms = ms_since(t_all);

  if (wants("asm"))
    std::cerr << "// ===== qkv stage 'asm' of graph '" << g.name() << "' =====\n"
              << emit_asm(*llvm_ir);

  KernelEntry entry;
  entry.owner = eng;
  entry.packed = *fn;
  entry.symbol = symbol;
  auto lazy = [llvm_ir](const std::string &stage) -> std::string {
    if (stage == "asm")
      return emit_asm(*llvm_ir);
    user_error("IR stage '" + stage + "' is not available");
  };
  return Kernel(g, std::move(entry), std::move(stages), lazy, std::move(stats));
}

} // namespace qkv
