// The CUDA target: Graph -> the CUDA pipeline's stages -> PTX, printed stage by stage
// (lower_to), and the device check of compile(). The PTX comes out of the gpu.binary ops
// gpu-module-to-binary makes; libdevice (the CUDA toolkit's math library) is linked into
// it when a toolkit is found, as the kernels' exp2, tanh, erf, ... need it.
#include "CompileCuda.h"

#include <qkv/runtime/cuda.hpp>

#include <cstdlib>
#include <filesystem>

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include "Import.h"
#include "qkv/compiler/transforms/Passes.h"

namespace qkv::cuda_target {

namespace {

const char *const kChips[] = {"sm_70", "sm_75", "sm_80", "sm_86", "sm_87", "sm_89", "sm_90"};

void check_chip(const std::string &chip) {
  std::string list;
  for (const char *c : kChips) {
    if (chip == c)
      return;
    list += std::string(list.empty() ? "" : ", ") + c;
  }
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

std::string print(mlir::ModuleOp m) {
  std::string s;
  llvm::raw_string_ostream os(s);
  m.print(os, mlir::OpPrintingFlags().printNameLocAsPrefix());
  return s;
}

} // namespace

std::string lower(const Graph &g, const Target &target, const std::string &stage,
                  const CompileOptions &options) {
  check_chip(target.chip);
  const auto &names = ir::cudaStageNames();
  auto last = std::find(names.begin(), names.end(), stage);
  if (stage == "graph")
    return g.str();
  if (last == names.end())
    user_error("unknown CUDA stage '" + stage +
               "'; stages are graph, qkv, linalg, loops, gpu, nvvm, ptx");
  if (options.checked)
    user_error("checked kernels are compiled for Target::host() only");
  ir::registerUpstreamPassesUsedByQkv();
  ir::registerQkvPassesAndPipelines();
  mlir::DialectRegistry registry;
  ir::registerQkvDialects(registry);
  ir::registerCudaDialects(registry);
  mlir::MLIRContext ctx(registry, mlir::MLIRContext::Threading::DISABLED);
  ctx.loadAllAvailableDialects();
  std::string diags;
  mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic &d) {
    llvm::raw_string_ostream os(diags);
    os << d.getLocation() << ": " << d << "\n";
    return mlir::success();
  });
  mlir::OwningOpRef<mlir::ModuleOp> module = ir::import_graph(ctx, g, false);
  ir::CudaPipelineOptions popts{target.chip, toolkit()};
  for (auto it = names.begin(); it != std::next(last); ++it) {
    mlir::PassManager pm(&ctx);
    std::string pipeline = ir::cudaStagePipeline(*it, popts);
    if (*it == "qkv" && !options.recognize_attention)
      pipeline = "canonicalize,cse";
    if (mlir::failed(mlir::parsePassPipeline(pipeline, pm)))
      throw CompileError(*it, "bad pass pipeline: " + pipeline + "\n" + diags);
    // Some conversions report an error without failing their pass: any error fails.
    if (mlir::failed(pm.run(*module)) || !diags.empty())
      throw CompileError(*it, diags.empty() ? "a pass failed without a diagnostic" : diags);
    if (*it == "gpu")
      check_host_code(*module, diags);
  }
  if (stage != "ptx")
    return print(*module);
  std::string ptx = ptx_of(*module);
  if (ptx.find(".extern .func") != std::string::npos)
    throw CompileError("ptx", "the PTX calls functions nothing defines (libdevice's math: no "
                              "CUDA toolkit with nvvm/libdevice was found in $CUDA_ROOT, "
                              "$CUDA_HOME, $CUDA_PATH or /usr/local/cuda)");
  return ptx;
}

Kernel compile(const Graph &g, const Target &target, const CompileOptions &options) {
  check_chip(target.chip);
  (void)options;
  cuda::Device device = cuda::Device::get(0); // "no CUDA device: <why>" without one
  throw CompileError("cuda", "running compiled CUDA kernels is not built yet (docs/gpu.md); " +
                                 device.name() + " is here, and lower_to(g, Target::cuda(\"" +
                                 target.chip + "\"), \"ptx\") gives the kernels' PTX");
}

} // namespace qkv::cuda_target
