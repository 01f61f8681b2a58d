// qkv::compile: look in the kernel cache; on a miss import, run the CPU pipeline stage by
// stage (keeping each stage's IR), translate to LLVM IR, optimise, make object code, store
// it in the cache, link it into the process and hand the entry point to a Kernel.
#include <qkv/compiler/compile.hpp>

#include <atomic>
#include <chrono>
#include <fstream>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include <unistd.h>

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IRReader/IRReader.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"

#include <qkv/runtime/amx.hpp>
#include <qkv/runtime/checks.hpp>
#include <qkv/runtime/env.hpp>
#include <qkv/runtime/kernel_abi.hpp>

#include "CodegenParts.h"
#include "CompileCuda.h"
#include "DeferredSchedules.h"
#include "Import.h"
#include "KernelCache.h"
#include "LibraryObjects.h"
#include "LlvmTranslation.h"
#include "ObjectJit.h"
#include "qkv/compiler/transforms/Passes.h"

namespace qkv {

CompileError::CompileError(std::string stage, std::string diagnostics)
    : Error("compile failed at stage '" + stage + "':\n" + diagnostics), stage_(std::move(stage)),
      diagnostics_(std::move(diagnostics)) {}

std::string cpu_stage_pipeline(const std::string &stage) {
  return cpu_stage_pipeline(stage, Schedule{});
}

namespace {

/// The host's CPU features, asked once: every compile and cache lookup needs them, and
/// under a hypervisor each cpuid the question takes traps (tens of microseconds).
const llvm::StringMap<bool> &host_features() {
  static const llvm::StringMap<bool> features = llvm::sys::getHostCPUFeatures();
  return features;
}

} // namespace

int host_vector_bits() {
  auto has = [](const char *f) { return host_features().lookup(f); };
  if (has("avx512f"))
    return 512;
  if (has("avx2") && has("fma"))
    return 256;
  return 128;
}

std::string isa_name(Isa isa) {
  switch (isa) {
  case Isa::Host: return "host";
  case Isa::F32: return "f32";
  case Isa::Avx512Bf16: return "avx512bf16";
  case Isa::Amx: return "amx";
  }
  return "?";
}

Isa parse_isa(const std::string &name, const std::string &what) {
  for (Isa isa : {Isa::Host, Isa::F32, Isa::Avx512Bf16, Isa::Amx})
    if (name == isa_name(isa))
      return isa;
  user_error(what + " is '" + name +
             "'; the tiers are host (the best this CPU has), f32, avx512bf16, amx");
}

std::vector<Isa> host_isas() {
  const llvm::StringMap<bool> &features = host_features();
  std::vector<Isa> out = {Isa::F32};
  if (!features.lookup("avx512bf16") || !features.lookup("avx512vl"))
    return out;
  out.push_back(Isa::Avx512Bf16);
  if (features.lookup("amx-tile") && features.lookup("amx-bf16"))
    out.push_back(Isa::Amx);
  return out;
}

Isa host_isa() { return host_isas().back(); }

namespace {

std::int64_t read_cache_bytes(int level) {
  auto read = [](const std::string &path) {
    std::ifstream f(path);
    std::string v;
    std::getline(f, v);
    return v;
  };
  // sysfs: the cache of `level` that holds data (L1d, or a unified L2).
  for (int i = 0; i < 8; ++i) {
    std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::string type = read(dir + "type");
    if (read(dir + "level") != std::to_string(level) || (type != "Data" && type != "Unified"))
      continue;
    std::string size = read(dir + "size");
    char *end = nullptr;
    long v = std::strtol(size.c_str(), &end, 10);
    if (v > 0)
      return v * (*end == 'K' ? 1024 : *end == 'M' ? 1024 * 1024 : 1);
  }
  long v = ::sysconf(level == 1 ? _SC_LEVEL1_DCACHE_SIZE : _SC_LEVEL2_CACHE_SIZE);
  if (v > 0)
    return v;
  return level == 1 ? 32 * 1024 : 512 * 1024;
}

} // namespace

std::int64_t host_cache_bytes(int level) {
  // Read once per level: the kernel cache's key and every compile's GEMM blocks ask.
  static const std::int64_t l1 = read_cache_bytes(1), l2 = read_cache_bytes(2);
  return level == 1 ? l1 : level == 2 ? l2 : read_cache_bytes(level);
}

namespace {

ir::CpuPipelineOptions pipeline_options(const Schedule &s, Isa isa = Isa::F32,
                                       MatmulPrecision precision = MatmulPrecision::Highest) {
  if (s.threads < 0)
    user_error("Schedule::threads must be 0 (all cores) or positive, got " +
               std::to_string(s.threads));
  if (s.q_tile < 0 || s.kv_tile < 0)
    user_error("Schedule: tile sizes must be 0 (default) or positive");
  if (s.decode_rows < 0)
    user_error("Schedule::decode_rows must be 0 (default) or positive, got " +
               std::to_string(s.decode_rows));
  if (s.gemm_k_block < 0 || s.gemm_m_block < 0)
    user_error("Schedule: GEMM block sizes must be 0 (from the host's caches) or positive, got "
               "gemm_k_block " + std::to_string(s.gemm_k_block) + ", gemm_m_block " +
               std::to_string(s.gemm_m_block));
  if (s.vector_bits != 0 && s.vector_bits != 128 && s.vector_bits != 256 && s.vector_bits != 512)
    user_error("Schedule::vector_bits must be 0 (the host's widest), 128, 256 or 512, got " +
               std::to_string(s.vector_bits));
  ir::CpuPipelineOptions o;
  o.vectorBits = s.vector_bits ? s.vector_bits : host_vector_bits();
  o.qTile = s.q_tile;
  o.kvTile = s.kv_tile;
  if (s.decode_rows > 0)
    o.decodeRows = s.decode_rows;
  o.threads = s.threads;
  o.l1Bytes = host_cache_bytes(1);
  o.l2Bytes = host_cache_bytes(2);
  o.gemmKc = s.gemm_k_block;
  o.gemmMc = s.gemm_m_block;
  o.isa = isa_name(isa);
  o.matmulPrecision = precision == MatmulPrecision::Medium ? "medium" : "highest";
  return o;
}

/// The tier a compile for the host runs on: the one asked for, else QKV_ISA's, else the
/// host's best; a qkv::Error when the host's CPU lacks it.
Isa resolve_isa(Isa asked, const std::vector<Isa> &have = host_isas(),
                const std::string &cpu = "this host's CPU") {
  std::string from = "CompileOptions::isa";
  if (asked == Isa::Host) {
    const char *env = std::getenv("QKV_ISA");
    if (!env || std::string_view(env).empty() || std::string_view(env) == "host")
      return have.back();
    from = "QKV_ISA";
    asked = parse_isa(env, from);
  }
  if (std::find(have.begin(), have.end(), asked) == have.end()) {
    std::string names;
    for (Isa i : have)
      names += (names.empty() ? "" : ", ") + isa_name(i);
    user_error(from + " asks for the " + isa_name(asked) + " tier, which " + cpu +
               " does not have (no " + (asked == Isa::Amx ? "amx_bf16" : "avx512_bf16") +
               "); its tiers: " + names);
  }
  return asked;
}

} // namespace

std::string cpu_stage_pipeline(const std::string &stage, const Schedule &schedule) {
  std::optional<Stage> s = parse_stage(stage);
  std::string p;
  if (s)
    p = ir::cpuStagePipeline(*s, pipeline_options(schedule, resolve_isa(Isa::Host)));
  if (p.empty())
    user_error("unknown CPU pipeline stage '" + stage + "' (qkv, linalg, loops, llvm)");
  return p;
}


namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

/// The native target: all a cache hit needs.
void init_target() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

/// The passes and pipelines: what a real compile needs besides.
void init_passes() {
  static std::once_flag once;
  std::call_once(once, [] {
    ir::registerUpstreamPassesUsedByQkv();
    ir::registerQkvPassesAndPipelines();
  });
}

/// The stages QKV_DUMP and options.dump ask for ("all" means every stage); an unknown
/// stage is an error naming where it came from.
std::vector<std::string> dump_list(const CompileOptions &o) {
  std::vector<std::pair<std::string, const char *>> asked;
  for (const std::string &s : o.dump)
    asked.emplace_back(s, "CompileOptions::dump");
  if (const char *env = std::getenv("QKV_DUMP")) {
    std::stringstream ss(env);
    std::string s;
    while (std::getline(ss, s, ','))
      if (!s.empty())
        asked.emplace_back(s, "QKV_DUMP");
  }
  std::vector<std::string> out;
  const auto &names = Kernel::stage_names();
  for (const auto &[s, from] : asked) {
    if (s == "all")
      return names;
    std::optional<Stage> stage = parse_stage(s);
    if (!stage || !stage_in(kCpuStages, *stage))
      user_error(std::string(from) + ": unknown stage '" + s +
                 "' (graph, qkv, linalg, loops, llvm, llvm-ir, asm, all)");
    out.push_back(s);
  }
  return out;
}

/// Assembly for the host from LLVM IR text (the optimised module the JIT ran).
std::string emit_asm(const std::string &ir_text) {
  llvm::LLVMContext ctx;
  llvm::SMDiagnostic err;
  auto mod = llvm::parseIR(llvm::MemoryBufferRef(ir_text, "qkv"), err, ctx);
  if (!mod)
    throw CompileError("asm", "cannot re-read the LLVM IR: " + err.getMessage().str());
  auto tm = jit::host_target_machine();
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

/// The IR of each stage as compilation passes through it, printed to stderr for the
/// stages asked for, and the time each took. A stage's text is made only when it is
/// printed or `keep_all` asks for every stage (printing the IR of every stage was 5% of
/// a compile); Kernel::ir makes the others by compiling again with keep_all.
struct StageLog {
  const Graph &g;
  const std::vector<std::string> &dump;
  bool keep_all = false;
  std::vector<std::pair<std::string, std::string>> stages;
  CompileStats stats;

  bool wants(const std::string &s) const {
    return std::find(dump.begin(), dump.end(), s) != dump.end();
  }
  void print(const std::string &stage, const std::string &text) const {
    std::cerr << "// ===== qkv stage '" << stage << "' of graph '" << g.name() << "' =====\n"
              << text << (text.empty() || text.back() == '\n' ? "" : "\n");
  }
  void keep(const std::string &stage, const std::function<std::string()> &text, double ms) {
    stats.stage_ms.emplace_back(stage, ms);
    if (!keep_all && !wants(stage))
      return;
    std::string t = text();
    if (wants(stage))
      print(stage, t);
    stages.emplace_back(stage, std::move(t));
  }
};

/// The `linalg` stage of a compile that defers attention schedules: the flash pass, the
/// schedules it outlined taken out (`deferred`), then the rest of the stage on the kernel's
/// own code, whose folded constants the schedules are then bound to.
void lower_linalg_deferring(mlir::ModuleOp module, const ir::CpuPipelineOptions &popts,
                            const std::string &diags,
                            std::vector<jit::DeferredSchedule> &deferred) {
  ir::runStageOrThrow(module, stage_name(Stage::Linalg), diags, [&](mlir::OpPassManager &pm) {
    ir::addCpuLinalgFlash(pm, popts);
    return true;
  });
  std::vector<jit::HeldSchedule> held = jit::hold_deferred_schedules(module);
  ir::runStageOrThrow(module, stage_name(Stage::Linalg), diags, [&](mlir::OpPassManager &pm) {
    ir::addCpuLinalgTail(pm);
    return true;
  });
  deferred = jit::bind_deferred_schedules(held, module);
}

/// Imports g and runs the CPU pipeline's stages on it, down to the LLVM dialect; with
/// `deferred`, the deferred attention schedules are taken out of the `linalg` stage into it.
mlir::OwningOpRef<mlir::ModuleOp> lower(mlir::MLIRContext &ctx, const Graph &g,
                                        const CompileOptions &options,
                                        const ir::CpuPipelineOptions &popts,
                                        const std::string &diags, StageLog &log,
                                        std::vector<jit::DeferredSchedule> *deferred) {
  auto t = Clock::now();
  mlir::OwningOpRef<mlir::ModuleOp> module =
      ir::import_graph(ctx, g, *options.checked, options.share_repeated_layers);
  double import_ms = ms_since(t);
  for (Stage stage : kCpuPassStages) {
    t = Clock::now();
    std::string name(stage_name(stage));
    if (stage == Stage::Linalg && deferred)
      lower_linalg_deferring(*module, popts, diags, *deferred);
    else
      ir::runStageOrThrow(*module, name, diags, [&](mlir::OpPassManager &pm) {
        return ir::addCpuStage(pm, stage, popts);
      });
    log.keep(
        name, [&] { return ir::print_module(*module); },
        ms_since(t) + (stage == Stage::Qkv ? import_ms : 0));
  }
  return module;
}

/// The optimised LLVM IR of a kernel's parts as one text (a header line before each part
/// when there are several).
std::string join_parts_ir(const std::vector<std::string> &parts) {
  if (parts.size() == 1)
    return parts[0];
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i)
    out += "; ===== part " + std::to_string(i + 1) + " of " + std::to_string(parts.size()) +
           " (compiled on its own thread) =====\n" + parts[i];
  return out;
}

/// Object code for the host from `module` (in the LLVM dialect): translated to LLVM IR,
/// given MLIR's packed wrappers and a stub for each of the `deferred` schedules taken out
/// of it, then optimised at `opt_level` for the host CPU at the schedule's vector width and
/// compiled, in up to `parts` parts on as many threads; with `defer`, each deferred
/// function (a schedule's stub, a GEMM's skinny function) is a part of its own, left as
/// bitcode. With `shared_library`, for a shared library (an ahead-of-time bundle) instead
/// of the JIT.
std::vector<jit::CompiledPart> to_objects(mlir::ModuleOp module, int opt_level,
                                          const ir::CpuPipelineOptions &popts, unsigned parts,
                                          bool keep_ir, bool defer,
                                          const std::vector<jit::DeferredSchedule> &deferred,
                                          const std::string &diags, bool shared_library,
                                          const std::string &target_cpu = "") {
  llvm::LLVMContext ctx;
  std::unique_ptr<llvm::Module> m = jit::translate(module, ctx);
  if (!m)
    throw CompileError("llvm-ir", "cannot translate to LLVM IR\n" + diags);
  auto tm = jit::host_target_machine(shared_library);
  jit::add_deferred_stubs(*m, deferred, popts);
  jit::prepare_module(*m, *tm);
  if (shared_library)
    jit::name_runtime_functions(*m);
  jit::set_code_attributes(*m, *tm, popts.vectorBits, target_cpu);
  return jit::compile_in_parts(*m, parts, opt_level, keep_ir, shared_library, defer);
}

/// The pipeline and LLVM: g imported, lowered stage by stage (kept in `log`) and compiled
/// to object code in parts. `llvm_ms` receives the time LLVM took. A JIT kernel defers the
/// attention schedules for shorter query lengths and the GEMMs' skinny functions to a
/// call that first needs them; a bundle compiles everything, and so does a compile that
/// keeps or prints any stage (its text is the whole kernel's).
std::vector<jit::CompiledPart> compile_to_parts(const Graph &g, const CompileOptions &options,
                                                const ir::CpuPipelineOptions &popts, StageLog &log,
                                                bool keep_ir, bool shared_library, double &llvm_ms,
                                                const std::string &target_cpu = "") {
  init_passes();
  std::shared_ptr<mlir::MLIRContext> ctx = ir::newCompileContext();
  std::string diags;
  auto handler = ir::collect_diagnostics(*ctx, diags);
  // Deferral is the CPU pipeline's (its flash pass outlines the schedules): the GPU tiles
  // on the host lower through the CUDA pipeline's linalg stage instead.
  bool defer = options.defer_schedules && !popts.gpuTiles && !keep_ir && !shared_library &&
               !log.keep_all && log.dump.empty();
  std::vector<jit::DeferredSchedule> deferred;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      lower(*ctx, g, options, popts, diags, log, defer ? &deferred : nullptr);
  auto t = Clock::now();
  std::vector<jit::CompiledPart> parts =
      to_objects(*module, options.opt_level, popts, jit::codegen_parts(options.compile_threads),
                 keep_ir, defer, deferred, diags, shared_library, target_cpu);
  llvm_ms = ms_since(t);
  return parts;
}

/// What the cache does for one compile.
struct CacheUse {
  cache::Key key;
  cache::Place place;
  std::string note; // CompileStats::cache_note so far
  double ms = 0;
  std::string isa, precision; // CompileStats::isa, matmul_precision

  void fill(CompileStats &s) const {
    s.isa = isa;
    s.matmul_precision = precision;
    s.cache_ms = ms;
    s.cache_key = place.path.empty() ? "" : key.hex;
    s.cache_path = place.path;
    s.cache_note = note;
  }
};

/// Stores the compiled object; a failure is one warning per folder, never an error.
void store(CacheUse &cu, const std::string &symbol, const std::vector<std::string> &objects) {
  if (!cu.place.write)
    return;
  auto t = Clock::now();
  std::string err = cache::write_entry(cu.place, cu.key, cache::Entry{symbol, objects});
  cu.ms += ms_since(t);
  if (err.empty()) {
    cu.note += ", stored";
    return;
  }
  cu.note += ", not stored (" + err + ")";
  cache::warn_once(cu.place.dir, err + "; kernels are compiled in memory only (shown once per "
                                       "folder)");
}

KernelEntry entry_of(jit::LoadedObject loaded, const std::string &symbol, bool checked) {
  KernelEntry entry;
  entry.owner = std::move(loaded.owner);
  entry.packed = loaded.packed;
  entry.symbol = symbol;
  entry.checked = checked;
  if (loaded.deferred_failures)
    entry.take_compile_failures = [log = loaded.deferred_failures] { return log->take(); };
  abi::Globals globals;
  globals.packed_params = loaded.packed_params.c_str();
  globals.schedules = loaded.schedules.c_str();
  globals.schedule_runs = loaded.schedule_runs;
  globals.attentions = loaded.attentions.c_str();
  globals.tile_counts = loaded.tile_counts;
  abi::apply_globals(globals, entry);
  return entry;
}

KernelEntry link(const std::vector<std::string> &objects, const std::string &symbol,
                 bool checked) {
  auto loaded = jit::load_object(objects, symbol);
  if (!loaded)
    throw CompileError("llvm-ir", "cannot link " + symbol + ": " +
                                      llvm::toString(loaded.takeError()));
  return entry_of(std::move(*loaded), symbol, checked);
}

Kernel compile_impl(const Graph &g, const Target &target, const CompileOptions &options,
                    const std::vector<std::string> &dump, bool keep_all,
                    Clock::time_point t_all);

/// The IR stages a kernel did not keep (all but the graph for a cache hit), made on
/// demand by compiling it again (cache off, nothing printed, every stage kept): the
/// pipeline is deterministic, so the text is what the first compile had.
std::function<std::string(const std::string &)>
recompile_on_demand(const Graph &g, const Target &target, const CompileOptions &o) {
  CompileOptions quiet = o;
  quiet.cache = CacheOptions::off();
  quiet.dump.clear();
  auto cold = std::make_shared<std::shared_ptr<Kernel>>();
  return [g, target, quiet, cold](const std::string &stage) {
    if (!*cold)
      *cold = std::make_shared<Kernel>(
          compile_impl(g, target, quiet, {}, /*keep_all=*/true, Clock::now()));
    return (*cold)->ir(stage);
  };
}

/// The kernel from a valid cache entry, or nullopt (cu.note says why) to compile it.
std::optional<Kernel> load_cached(const Graph &g, const Target &target,
                                  const CompileOptions &options, CacheUse &cu,
                                  Clock::time_point t_all) {
  auto t = Clock::now();
  std::string invalid;
  std::optional<cache::Entry> e = cache::read_entry(cu.place, cu.key, invalid);
  std::optional<jit::LoadedObject> loaded;
  if (e && e->symbol != abi::c_interface_symbol(ir::function_name(g)))
    invalid = "the entry's symbol is " + e->symbol;
  else if (e) {
    auto l = jit::load_object(e->objects, e->symbol);
    if (l)
      loaded = std::move(*l);
    else
      invalid = "the object did not link: " + llvm::toString(l.takeError());
  }
  cu.ms += ms_since(t);
  if (!loaded) {
    cu.note = invalid.empty() ? "miss" : "rebuilt (" + invalid + ")";
    return std::nullopt;
  }
  cu.note = "hit";
  CompileStats stats;
  stats.from_cache = true;
  stats.stage_ms = {{"cache", cu.ms}};
  cu.fill(stats);
  stats.total_ms = ms_since(t_all);
  KernelEntry entry = entry_of(std::move(*loaded), e->symbol, *options.checked);
  return Kernel(g, std::move(entry), {{"graph", g.str()}}, recompile_on_demand(g, target, options),
                std::move(stats));
}

/// The pipeline, LLVM and the linker, storing the object in the cache on the way.
Kernel compile_cold(const Graph &g, const Target &target, const CompileOptions &options,
                    const ir::CpuPipelineOptions &popts, const std::vector<std::string> &dump,
                    bool keep_all, CacheUse &cu, Clock::time_point t_all) {
  StageLog log{g, dump, keep_all, {}, {}};
  log.stages.emplace_back("graph", g.str());
  log.stats.stage_ms.emplace_back("graph", 0);
  bool keep_ir = keep_all || log.wants("llvm-ir") || log.wants("asm");
  double llvm_ms = 0;
  std::vector<jit::CompiledPart> parts =
      compile_to_parts(g, options, popts, log, keep_ir, /*shared_library=*/false, llvm_ms);
  auto t = Clock::now();
  std::vector<std::string> objects;
  auto part_ir = std::make_shared<std::vector<std::string>>();
  for (jit::CompiledPart &p : parts) {
    jit::take_objects(p, objects);
    part_ir->push_back(std::move(p.ir));
    log.stats.deferred_parts += p.deferred ? 1 : 0;
  }
  std::string symbol = abi::c_interface_symbol(ir::function_name(g));
  KernelEntry entry = link(objects, symbol, *options.checked);
  log.keep(
      "llvm-ir", [&] { return join_parts_ir(*part_ir); }, llvm_ms + ms_since(t));
  log.stats.codegen_parts = static_cast<int>(parts.size()) - log.stats.deferred_parts;
  store(cu, symbol, objects); // only objects that linked
  cu.fill(log.stats);
  log.stats.total_ms = ms_since(t_all);
  auto assembly = [part_ir] {
    std::string out;
    for (const std::string &text : *part_ir)
      out += emit_asm(text);
    return out;
  };
  if (log.wants("asm"))
    log.print("asm", assembly());

  std::function<std::string(const std::string &)> lazy =
      [assembly](const std::string &stage) -> std::string {
    if (stage == "asm")
      return assembly();
    user_error("IR stage '" + stage + "' is not available");
  };
  if (!keep_all)
    lazy = recompile_on_demand(g, target, options);
  return Kernel(g, std::move(entry), std::move(log.stages), lazy, std::move(log.stats));
}

/// compile() once the graph is verified and the dump list known.
Kernel compile_impl(const Graph &g, const Target &target, const CompileOptions &options,
                    const std::vector<std::string> &dump, bool keep_all,
                    Clock::time_point t_all) {
  ir::CpuPipelineOptions popts =
      pipeline_options(options.schedule, options.isa, options.matmul_precision);
  popts.gpuTiles = target.kind == Target::Kind::GpuTilesOnHost;
  popts.recognizeAttention = options.recognize_attention;
  CacheUse cu;
  cu.isa = popts.isa;
  cu.precision = popts.matmulPrecision;
  auto t = Clock::now();
  cu.key = cache::make_key(g, options, static_cast<int>(popts.vectorBits), target.str());
  cu.place = cache::place(options, cu.key);
  cu.ms = ms_since(t);
  if (!cu.place.off.empty())
    cu.note = "off (" + cu.place.off + ")";
  else if (!cu.place.read)
    cu.note = "not read (CompileOptions::cache.read)";
  else if (!dump.empty())
    cu.note = "not read (stages are being dumped)";
  else if (std::optional<Kernel> k = load_cached(g, target, options, cu, t_all))
    return std::move(*k);
  return compile_cold(g, target, options, popts, dump, keep_all, cu, t_all);
}

/// The CompileOptions fields that no target takes out of range.
void check_options(const CompileOptions &options) {
  if (options.compile_threads < 0)
    user_error("CompileOptions::compile_threads must be 0 (the host's hardware threads, at "
               "most 4) or positive, got " +
               std::to_string(options.compile_threads));
  if (options.opt_level < 0 || options.opt_level > 3)
    user_error("CompileOptions::opt_level must be an LLVM optimisation level, 0 to 3, got " +
               std::to_string(options.opt_level));
}

/// Whether a compile for `target` that does not say is checked: QKV_CHECKED, else yes;
/// only the CPU has checks.
bool checked_by_default(const Target &target) {
  return target.kind == Target::Kind::HostCpu && env_switch("QKV_CHECKED").value_or(true);
}

/// The options of a compile for a host target (the CPU, or the GPU tiles on it): the
/// native target initialised, `checked` decided (asked for, else the default; checked
/// kernels for the CPU only) and kept only where some site of g is not proved safe.
CompileOptions host_options(const Graph &g, const Target &target, const CompileOptions &options) {
  init_target();
  CompileOptions o = options;
  if (o.checked.value_or(false) && target.kind == Target::Kind::GpuTilesOnHost)
    user_error("checked kernels are compiled for Target::host() only");
  bool on = o.checked.has_value() ? *o.checked : checked_by_default(target);
  o.checked = on && checks::needs_checks(g);
  o.isa = resolve_isa(o.isa);
  if (o.isa == Isa::Amx) // before any of its tile instructions can run: else SIGILL
    request_amx_tile_state();
  return o;
}

} // namespace

Kernel compile(const Graph &g, const Target &target, const CompileOptions &options) {
  auto t_all = Clock::now();
  init_target(); // the CUDA target's host code is JIT-compiled for the CPU too
  g.verify();
  check_options(options);
  if (target.kind == Target::Kind::Cuda)
    return cuda_target::compile(g, target, options);
  CompileOptions o = host_options(g, target, options);
  return compile_impl(g, target, o, dump_list(o), /*keep_all=*/false, t_all);
}

std::string lower_to(const Graph &g, const Target &target, Stage stage,
                     const CompileOptions &options) {
  return lower_to(g, target, std::string(stage_name(stage)), options);
}

std::string lower_to(const Graph &g, const Target &target, const std::string &stage,
                     const CompileOptions &options) {
  g.verify();
  check_options(options);
  if (target.kind == Target::Kind::Cuda)
    return cuda_target::lower(g, target, stage, options);
  if (stage == "graph")
    return g.str();
  // One compile that keeps every stage's text (compile() keeps none).
  CompileOptions o = host_options(g, target, options);
  return compile_impl(g, target, o, dump_list(o), /*keep_all=*/true, Clock::now()).ir(stage);
}

std::vector<Kernel> compile_all(const std::vector<Graph> &graphs, const Target &target,
                                const CompileOptions &options) {
  check_options(options);
  std::vector<std::optional<Kernel>> done(graphs.size());
  std::vector<std::exception_ptr> failed(graphs.size());
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i; (i = next++) < graphs.size();) {
      try {
        done[i] = compile(graphs[i], target, options);
      } catch (...) {
        failed[i] = std::current_exception();
      }
    }
  };
  std::size_t threads = std::min<std::size_t>(jit::codegen_parts(options.compile_threads),
                                              graphs.size());
  std::vector<std::thread> others;
  for (std::size_t t = 1; t < threads; ++t)
    others.emplace_back(worker);
  worker();
  for (std::thread &t : others)
    t.join();
  std::vector<Kernel> out;
  for (std::size_t i = 0; i < graphs.size(); ++i) {
    if (failed[i])
      std::rethrow_exception(failed[i]);
    out.push_back(std::move(*done[i]));
  }
  return out;
}

namespace host {

void init_native_target() { init_target(); }

namespace {

/// What a CPU named for an ahead-of-time bundle has: its ISA tiers, its widest vectors and
/// its features among kCpuFeatureNames, from LLVM's description of it. An unknown name is a
/// qkv::Error.
struct NamedCpu {
  std::vector<Isa> isas;
  int vector_bits = 128;
  std::string features; ///< "+avx2,+fma,..."
};

NamedCpu describe_cpu(const std::string &cpu) {
  auto tm = jit::host_target_machine(true);
  const llvm::MCSubtargetInfo *sti = tm->getMCSubtargetInfo();
  if (!sti->isCPUStringValid(cpu))
    user_error("export: unknown CPU '" + cpu +
               "' (LLVM's x86 CPU names: x86-64-v2, x86-64-v3, x86-64-v4, skylake-avx512, "
               "sapphirerapids, znver4, ...)");
  std::unique_ptr<llvm::MCSubtargetInfo> named(
      tm->getTarget().createMCSubtargetInfo(tm->getTargetTriple(), cpu, ""));
  auto has = [&](const char *f) { return named->checkFeatures(std::string("+") + f); };
  NamedCpu out;
  out.vector_bits = has("avx512f") ? 512 : has("avx2") && has("fma") ? 256 : 128;
  out.isas = {Isa::F32};
  if (has("avx512bf16") && has("avx512vl"))
    out.isas.push_back(Isa::Avx512Bf16);
  if (out.isas.size() == 2 && has("amx-tile") && has("amx-bf16"))
    out.isas.push_back(Isa::Amx);
  for (const char *f : kCpuFeatureNames)
    if (has(f))
      out.features += (out.features.empty() ? "+" : ",+") + std::string(f);
  return out;
}

/// compile_library_objects' options for a named CPU: its tiers and vector width, not the
/// host's.
CompileOptions named_cpu_options(const Graph &g, const CompileOptions &options,
                                 const NamedCpu &target, const std::string &cpu) {
  CompileOptions o = options;
  if (o.schedule.vector_bits > target.vector_bits)
    user_error("export: Schedule::vector_bits is " + std::to_string(o.schedule.vector_bits) + "; " +
               cpu + " has " + std::to_string(target.vector_bits) + "-bit vectors");
  if (o.schedule.vector_bits == 0)
    o.schedule.vector_bits = target.vector_bits;
  bool on = o.checked.has_value() ? *o.checked : checked_by_default(Target::host());
  o.checked = on && checks::needs_checks(g);
  o.isa = resolve_isa(o.isa, target.isas, cpu);
  return o;
}

} // namespace

LibraryObjects compile_library_objects(const Graph &g, const CompileOptions &options,
                                       const std::string &cpu) {
  auto t_all = Clock::now();
  init_target();
  g.verify();
  check_options(options);
  LibraryObjects out;
  NamedCpu target;
  if (!cpu.empty())
    target = describe_cpu(cpu);
  out.options = cpu.empty() ? host_options(g, Target::host(), options)
                            : named_cpu_options(g, options, target, cpu);
  ir::CpuPipelineOptions popts =
      pipeline_options(out.options.schedule, out.options.isa, out.options.matmul_precision);
  popts.recognizeAttention = out.options.recognize_attention;
  out.isa = popts.isa;
  out.matmul_precision = popts.matmulPrecision;
  std::vector<std::string> dump = dump_list(out.options);
  StageLog log{g, dump, false, {}, {}};
  double llvm_ms = 0;
  for (jit::CompiledPart &p : compile_to_parts(g, out.options, popts, log, /*keep_ir=*/false,
                                               /*shared_library=*/true, llvm_ms, cpu))
    jit::take_objects(p, out.objects);
  out.symbol = abi::c_interface_symbol(ir::function_name(g));
  auto tm = jit::host_target_machine(true);
  out.triple = tm->getTargetTriple().str();
  out.cpu = cpu.empty() ? llvm::sys::getHostCPUName().str() : cpu;
  out.features = cpu.empty() ? tm->getTargetFeatureString().str() : target.features;
  out.ms = ms_since(t_all);
  return out;
}

} // namespace host

} // namespace qkv
