// The CUDA target: Graph -> the CUDA pipeline's stages -> PTX, printed stage by stage
// (lower_to), and compile(): the PTX embedded in the host code, which is JIT-compiled for
// the CPU and linked against qkv::cuda's host functions. The PTX comes out of the
// gpu.binary ops gpu-module-to-binary makes; libdevice (the CUDA toolkit's math library) is
// linked into it when a toolkit is found, as the kernels' exp2, tanh, erf, ... need it.
#include "CompileCuda.h"

#include <qkv/runtime/cuda.hpp>
#include <qkv/runtime/kernel_abi.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/Module.h"

#include "CodegenParts.h"
#include "Import.h"
#include "ObjectJit.h"
#include "qkv/compiler/transforms/Passes.h"

namespace qkv {

const std::vector<std::string> &cuda_chips() {
  static const std::vector<std::string> chips = {"sm_70", "sm_75", "sm_80", "sm_86",
                                                 "sm_87", "sm_89", "sm_90"};
  return chips;
}

std::string cuda_chip_for(const std::string &arch) {
  const std::vector<std::string> &chips = cuda_chips();
  return std::find(chips.begin(), chips.end(), arch) != chips.end() ? arch : "sm_90";
}

} // namespace qkv

namespace qkv::cuda_target {

namespace {

void check_chip(const std::string &chip) {
  const std::vector<std::string> &chips = cuda_chips();
  if (std::find(chips.begin(), chips.end(), chip) != chips.end())
    return;
  std::string list;
  for (const std::string &c : chips)
    list += (list.empty() ? "" : ", ") + c;
  user_error("Target::cuda: unknown chip '" + chip + "'; qkv compiles for " + list);
}

/// The CUDA toolkit whose libdevice the kernels link: $CUDA_ROOT, $CUDA_HOME, $CUDA_PATH
/// or /usr/local/cuda, the first that has nvvm/libdevice; "" when none has.
std::string toolkit() {
  std::vector<std::string> places;
  for (const char *var : {"CUDA_ROOT", "CUDA_HOME", "CUDA_PATH"})
    if (const char *v = std::getenv(var); v && *v)
      places.push_back(v);
  places.push_back("/usr/local/cuda");
  for (const std::string &p : places)
    if (std::filesystem::exists(std::filesystem::path(p) / "nvvm" / "libdevice"))
      return p;
  return "";
}

/// Every kernel module's PTX, each under a header line naming it and its chip.
std::string ptx_of(mlir::ModuleOp m) {
  std::string out;
  m.walk([&](mlir::gpu::BinaryOp bin) {
    for (mlir::Attribute a : bin.getObjectsAttr()) {
      auto obj = mlir::cast<mlir::gpu::ObjectAttr>(a);
      std::string chip = "?";
      if (auto t = mlir::dyn_cast<mlir::NVVM::NVVMTargetAttr>(obj.getTarget()))
        chip = t.getChip().str();
      out += "// ===== kernel module @" + bin.getSymName().str() + " for " + chip + " =====\n" +
             obj.getObject().getValue().str();
    }
  });
  return out;
}

/// After the gpu stage the host functions only compute sizes and launch kernels: a load
/// or store left in them would touch device memory from the CPU.
void check_host_code(mlir::ModuleOp m, const std::string &diags) {
  std::string bad;
  m.walk([&](mlir::func::FuncOp fn) {
    fn.walk([&](mlir::Operation *op) {
      if (bad.empty() && mlir::isa<mlir::memref::LoadOp, mlir::memref::StoreOp,
                                   mlir::vector::LoadOp, mlir::vector::StoreOp>(op)) {
        llvm::raw_string_ostream os(bad);
        os << op->getLoc() << ": '" << op->getName() << "'";
      }
    });
  });
  if (!bad.empty())
    throw CompileError("gpu", "the host code still reads or writes memory (device memory, on a "
                              "GPU) at " + bad + "; this graph's ops have no CUDA kernel yet\n" +
                              diags);
}


} // namespace

namespace {

/// A graph in the CUDA pipeline: its context, module and the diagnostics so far.
struct CudaLowering {
  std::unique_ptr<mlir::MLIRContext> ctx;
  std::string diags;
  std::unique_ptr<mlir::ScopedDiagnosticHandler> handler;
  mlir::OwningOpRef<mlir::ModuleOp> module;

  CudaLowering(const Graph &g, const CompileOptions &options) {
    if (options.checked.value_or(false))
      user_error("checked kernels are compiled for Target::host() only");
    ir::registerUpstreamPassesUsedByQkv();
    ir::registerQkvPassesAndPipelines();
    ctx = ir::newCompileContext([](mlir::DialectRegistry &registry) {
      ir::registerCudaDialects(registry);
      mlir::gpu::registerOffloadingLLVMTranslationInterfaceExternalModels(registry);
    });
    handler = ir::collect_diagnostics(*ctx, diags);
    module = ir::import_graph(*ctx, g, false);
  }

  /// The CUDA stages up to and including `last`.
  void stages(const Target &target, const CompileOptions &options, Stage last) {
    ir::CudaPipelineOptions popts{target.chip, toolkit(), options.recognize_attention};
    for (Stage stage : kCudaPassStages) {
      // Any error diagnostic fails a stage: some conversions report one without failing.
      ir::runStageOrThrow(
          *module, stage_name(stage), diags,
          [&](mlir::OpPassManager &pm) { return ir::addCudaStage(pm, stage, popts); }, "",
          /*anyDiagnosticFails=*/true);
      if (stage == Stage::Gpu)
        check_host_code(*module, diags);
      if (stage == Stage::Ptx && ptx_of(*module).find(".extern .func") != std::string::npos)
        throw CompileError("ptx", "the PTX calls functions nothing defines (libdevice's math: "
                                  "no CUDA toolkit with nvvm/libdevice was found in "
                                  "$CUDA_ROOT, $CUDA_HOME, $CUDA_PATH or /usr/local/cuda)");
      if (stage == last)
        return;
    }
  }
};

/// The functions an llvm.global_ctors/dtors array lists, in order; the array is removed
/// and the functions made external, for the loader to call (the JIT runs no initialisers).
std::vector<std::string> take_structors(llvm::Module &m, const char *array) {
  std::vector<std::string> out;
  llvm::GlobalVariable *gv = m.getNamedGlobal(array);
  if (!gv)
    return out;
  if (auto *list = llvm::dyn_cast<llvm::ConstantArray>(gv->getInitializer()))
    for (llvm::Value *entry : list->operands())
      if (auto *fn = llvm::dyn_cast<llvm::Function>(
              llvm::cast<llvm::ConstantStruct>(entry)->getOperand(1))) {
        fn->setLinkage(llvm::GlobalValue::ExternalLinkage);
        out.push_back(fn->getName().str());
      }
  gv->eraseFromParent();
  return out;
}

} // namespace

std::string lower(const Graph &g, const Target &target, const std::string &stage,
                  const CompileOptions &options) {
  check_chip(target.chip);
  if (stage == "graph")
    return g.str();
  std::optional<Stage> s = parse_stage(stage);
  if (!s || !stage_in(kCudaPassStages, *s))
    user_error("unknown CUDA stage '" + stage +
               "'; stages are graph, qkv, linalg, loops, gpu, nvvm, ptx");
  CudaLowering l(g, options);
  l.stages(target, options, *s);
  return *s == Stage::Ptx ? ptx_of(*l.module) : ir::print_module(*l.module);
}

namespace {

/// gpu.alloc and gpu.dealloc as memref.alloc and dealloc: MLIR 22's gpu-to-llvm lowers
/// only the asynchronous gpu.alloc; the synchronous ones become memref.allocs whose generic
/// allocation functions are the device's (qkv::cuda::host_functions). (Before
/// gpu-to-llvm, whose own memref patterns would call malloc.)
void device_allocs_as_memref(mlir::ModuleOp module) {
  module->walk([](mlir::gpu::AllocOp a) {
    mlir::OpBuilder b(a);
    auto m = mlir::memref::AllocOp::create(b, a.getLoc(), a.getMemref().getType(),
                                           a.getDynamicSizes(), a.getSymbolOperands());
    a.getMemref().replaceAllUsesWith(m.getResult());
    a.erase();
  });
  module->walk([](mlir::gpu::DeallocOp d) {
    mlir::OpBuilder b(d);
    mlir::memref::DeallocOp::create(b, d.getLoc(), d.getMemref());
    d.erase();
  });
}

} // namespace

HostCode host_code(const Graph &g, const Target &target, const CompileOptions &options,
                   bool shared_library) {
  check_chip(target.chip);
  CudaLowering l(g, options);
  l.stages(target, options, Stage::Ptx);
  HostCode out;
  out.ptx = ptx_of(*l.module);
  l.module->walk([&](mlir::gpu::BinaryOp bin) {
    for (mlir::Attribute a : bin.getObjectsAttr())
      out.modules.emplace_back(bin.getSymName().str(),
                               mlir::cast<mlir::gpu::ObjectAttr>(a).getObject().getValue().str());
  });
  // The host code: sizes, device buffers and launches, in the LLVM dialect; each kernel
  // module's PTX is a constant that its loader hands to mgpuModuleLoadJIT.
  device_allocs_as_memref(*l.module);
  ir::runStageOrThrow(
      *l.module, "host", l.diags,
      [](mlir::OpPassManager &pm) {
        ir::addCudaHostToLlvm(pm);
        return true;
      },
      "", /*anyDiagnosticFails=*/true);
  llvm::LLVMContext llvm_ctx;
  std::unique_ptr<llvm::Module> m = mlir::translateModuleToLLVMIR(*l.module, llvm_ctx);
  if (!m)
    throw CompileError("host", "cannot translate the host code to LLVM IR\n" + l.diags);
  out.inits = take_structors(*m, "llvm.global_ctors");
  out.finis = take_structors(*m, "llvm.global_dtors");
  auto tm = jit::host_target_machine(shared_library);
  std::vector<std::string> called_by_name = out.inits;
  called_by_name.insert(called_by_name.end(), out.finis.begin(), out.finis.end());
  jit::prepare_module(*m, *tm, called_by_name);
  if (shared_library) {
    jit::name_runtime_functions(*m, &cuda::host_function_exports());
    // A bundle's host code runs on another machine's CPU: code for any x86-64 (it only
    // computes sizes and launches kernels).
    for (llvm::Function &f : *m)
      if (!f.isDeclaration()) {
        f.addFnAttr("target-cpu", kPortableCpu);
        f.addFnAttr("target-features", "+sse2");
      }
  }
  for (jit::CompiledPart &p :
       jit::compile_in_parts(*m, 1, options.opt_level, /*keep_ir=*/true, shared_library))
    jit::take_objects(p, out.objects);
  out.symbol = abi::c_interface_symbol(ir::function_name(g));
  return out;
}

Kernel compile(const Graph &g, const Target &target, const CompileOptions &options) {
  check_chip(target.chip);
  cuda::Device device = cuda::Device::get(0); // "no CUDA device: <why>" without one
  HostCode code = host_code(g, target, options, /*shared_library=*/false);
  auto loaded =
      jit::load_object(code.objects, code.symbol, cuda::host_functions(), code.inits, code.finis);
  if (!loaded)
    throw CompileError("host",
                       "cannot link " + code.symbol + ": " + llvm::toString(loaded.takeError()));
  if (std::optional<std::string> e = cuda::take_host_error())
    throw CompileError("cuda", "loading the kernels on " + device.name() + ": " + *e);
  KernelEntry entry;
  entry.owner = std::move(loaded->owner);
  entry.packed = loaded->packed;
  entry.symbol = code.symbol;
  entry.on_cuda = true;
  CompileStats stats;
  stats.codegen_parts = 1;
  stats.cache_note = "off (CUDA kernels are not cached yet)";
  return Kernel(g, std::move(entry), {{"graph", g.str()}},
                [g, target, options](const std::string &stage) {
                  return lower(g, target, stage, options);
                },
                std::move(stats));
}

} // namespace qkv::cuda_target
