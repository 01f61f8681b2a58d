// The CPU pipeline as named stages, each a textual pass list (what --dump-pass-pipeline
// shows), and the registration of passes, pipelines and dialects.
#include "qkv/compiler/transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/BufferDeallocationOpInterfaceImpl.h"
#include "mlir/Dialect/Arith/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/FuncBufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/ControlFlow/Transforms/BufferDeallocationOpInterfaceImpl.h"
#include "mlir/Dialect/ControlFlow/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Index/IR/IndexDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Linalg/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/IR/MemRefMemorySlot.h"
#include "mlir/Dialect/MemRef/Transforms/AllocationOpInterfaceImpl.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/OpenMP/OpenMPDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/BufferDeallocationOpInterfaceImpl.h"
#include "mlir/Dialect/SCF/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"
#include "mlir/Dialect/AMX/AMXDialect.h"
#include "mlir/Dialect/AMX/Transforms.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/OpenMP/OpenMPToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/GPUCommon/GPUToLLVM.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVM.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/OpenMPToLLVM/ConvertOpenMPToLLVM.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVM.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/Transforms/Passes.h"
#include "mlir/Dialect/UB/IR/UBOps.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"

#include <mutex>

namespace qkv::ir {

namespace {

const char *const kBufferize =
    "one-shot-bufferize{bufferize-function-boundaries "
    "function-boundary-type-conversion=identity-layout-map},"
    "drop-equivalent-buffer-results,"
    "buffer-results-to-out-params{modify-public-functions hoist-static-allocs "
    "hoist-dynamic-allocs}";

/// 90 for "sm_90" (0 when it is not of that form).
int chipNumber(llvm::StringRef chip) {
  int n = 0;
  return chip.consume_front("sm_") && !chip.getAsInteger(10, n) ? n : 0;
}

} // namespace

std::string cudaStagePipeline(Stage stage, const CudaPipelineOptions &o) {
  if (stage == Stage::Qkv)
    return cpuStagePipeline(Stage::Qkv);
  if (stage == Stage::Linalg)
    // Tensor cores (mma.sync m16n8k16) from sm_80 on.
    return std::string("qkv-lower-attention-to-gpu-tiles{mma=") +
           (chipNumber(o.chip) >= 80 ? "true" : "false") +
           "},func.func(qkv-lower-to-linalg,convert-elementwise-to-linalg),canonicalize,cse";
  if (stage == Stage::Loops)
    return std::string("func.func(qkv-copy-repeated-results,qkv-unshare-fills),") + kBufferize +
           ",func.func(convert-linalg-to-parallel-loops),qkv-deallocate-buffers,"
           "canonicalize,cse";
  if (stage == Stage::Gpu)
    // Tiling before mapping: the outer loop's dims go to blocks, the tile's to threads
    // (canonicalize would merge the two loops again, so it runs only after the mapping).
    return "func.func(qkv-map-tiles-to-gpu,qkv-host-to-device,"
           "scf-parallel-loop-tiling{parallel-loop-tile-sizes=16,16 no-min-max-bounds=true},"
           "gpu-map-parallel-loops,convert-parallel-loops-to-gpu),canonicalize,"
           "func.func(gpu-launch-sink-index-computations),gpu-kernel-outlining,canonicalize,cse";
  if (stage == Stage::Nvvm)
    // The attention kernel's warp-level vector.contract ops become mma.sync (bf16 ones
    // through the f16 path, WarpMmaToNvgpu.cpp) before the rest goes to NVVM.
    return "nvvm-attach-target{chip=" + o.chip + " O=3},"
           "gpu.module(gpu.func(qkv-warp-mma-to-nvgpu),convert-nvgpu-to-nvvm,"
           "gpu.func(qkv-restore-bf16-mma),fold-memref-alias-ops,"
           "expand-strided-metadata,lower-affine,convert-scf-to-cf,convert-gpu-to-nvvm,"
           "canonicalize,cse,reconcile-unrealized-casts)";
  if (stage == Stage::Ptx)
    return "gpu-module-to-binary{format=isa" +
           (o.toolkit.empty() ? std::string() : " toolkit=" + o.toolkit) + "}";
  return "";
}

std::string cpuStagePipeline(Stage stage, const CpuPipelineOptions &o) {
  if (o.gpuTiles && (stage == Stage::Linalg || stage == Stage::Loops))
    return cudaStagePipeline(stage);
  if (o.gpuTiles && stage == Stage::Llvm) {
    CpuPipelineOptions cpu = o;
    cpu.gpuTiles = false;
    // The warps' tile contractions (mma.sync on the GPU) as vector code: 2-D transfers
    // unrolled, contractions to outer products.
    cpu.warpTiles = true;
    return "func.func(qkv-tiles-to-cpu-loops,convert-vector-to-scf{full-unroll=true})," +
           cpuStagePipeline(stage, cpu);
  }
  std::string flash = "qkv-lower-attention-to-flash{vector-bits=" + std::to_string(o.vectorBits) +
                      " q-tile=" + std::to_string(o.qTile) +
                      " kv-tile=" + std::to_string(o.kvTile) +
                      " decode-rows=" + std::to_string(o.decodeRows) + " isa=" + o.isa + "}";
  if (stage == Stage::Qkv)
    return "canonicalize,func.func(qkv-recognize-attention),cse";
  if (stage == Stage::Linalg)
    // convert-elementwise-to-linalg: the f32 <-> f16/bf16 conversions of half-precision
    // graphs (arith.extf/truncf on tensors, from the import).
    return flash + ",func.func(qkv-lower-to-linalg,convert-elementwise-to-linalg),canonicalize,cse,"
                   "func.func(qkv-fuse-casts)";
  if (stage == Stage::Loops)
    return std::string("func.func(qkv-copy-repeated-results,qkv-unshare-fills),") + kBufferize +
           ",qkv-lower-matmul-to-microkernels{vector-bits=" + std::to_string(o.vectorBits) +
           " l1-bytes=" + std::to_string(o.l1Bytes) + " l2-bytes=" + std::to_string(o.l2Bytes) +
           " kc=" + std::to_string(o.gemmKc) + " mc=" + std::to_string(o.gemmMc) +
           " isa=" + o.isa + " precision=" + o.matmulPrecision +
           "},qkv-vectorize-elementwise{vector-bits=" + std::to_string(o.vectorBits) +
           "},func.func(convert-linalg-to-parallel-loops),"
           "qkv-deallocate-buffers,cse,canonicalize,cse";
  if (stage == Stage::Llvm)
    // scf.parallel becomes OpenMP first; memrefs go to LLVM before scf does, because the
    // alloca scopes OpenMP wraps around each task must still be single blocks then.
    // memref.alloc calls MLIR's generic allocation functions, which the JIT binds to the
    // runtime's buffer cache (qkv/runtime/buffer_cache.hpp): no fresh pages per call.
    return "qkv-lower-checks,convert-scf-to-openmp{num-threads=" + std::to_string(o.threads) +
           "},convert-vector-to-llvm{reassociate-fp-reductions" +
           (o.isa == "avx512bf16" || o.isa == "amx" ? " enable-x86vector" : "") +
           (o.isa == "amx" ? " enable-amx" : "") +
           (o.warpTiles ? " vector-contract-lowering=outerproduct" : "") +
           "},expand-strided-metadata,"
           "lower-affine,finalize-memref-to-llvm{use-generic-functions=true},func.func(convert-scf-to-cf)," +
           // The AMX tiles a GEMM's or attention's register tile carries through its K
           // loop are block arguments of cf branches by now, attention's inside the
           // OpenMP loop's region: convert-cf-to-llvm's and convert-openmp-to-llvm's type
           // converters do not know !amx.tile. On amx, convert-to-llvm (with the amx, cf
           // and omp dialects' interfaces) converts them all with one type converter.
           std::string(o.isa == "amx" ? "" : "convert-openmp-to-llvm,") +
           "convert-math-to-llvm,convert-math-to-libm,"
           "convert-arith-to-llvm,convert-index-to-llvm,convert-func-to-llvm," +
           std::string(o.isa == "amx" ? "convert-to-llvm," : "convert-cf-to-llvm,") +
           (o.warpTiles ? "convert-ub-to-llvm," : "") +
           "reconcile-unrealized-casts";
  return "";
}

mlir::LogicalResult buildCpuStage(mlir::OpPassManager &pm, Stage stage) {
  std::string p = cpuStagePipeline(stage);
  return mlir::success(!p.empty() && mlir::succeeded(mlir::parsePassPipeline(p, pm)));
}

mlir::LogicalResult buildCpuPipeline(mlir::OpPassManager &pm) {
  for (Stage s : kCpuPassStages)
    if (mlir::failed(buildCpuStage(pm, s)))
      return mlir::failure();
  return mlir::success();
}

void registerUpstreamPassesUsedByQkv() {
  static std::once_flag once;
  std::call_once(once, [] {
    mlir::registerTransformsPasses();
    mlir::registerConversionPasses();
    mlir::bufferization::registerBufferizationPasses();
    mlir::bufferization::registerBufferizationPipelines();
    mlir::registerLinalgPasses();
    mlir::memref::registerMemRefPasses();
    mlir::registerGPUPasses();
    mlir::registerSCFPasses();
  });
}

void registerQkvPassesAndPipelines() {
  static std::once_flag once;
  std::call_once(once, [] {
    registerQkvPasses();
    // A pipeline that does not parse is reported through qkv-opt's error handler.
    auto reported = [](mlir::LogicalResult built, llvm::StringRef id,
                       llvm::function_ref<mlir::LogicalResult(const llvm::Twine &)> error) {
      return mlir::succeeded(built) ? built : error("qkv: pipeline " + id + " does not parse");
    };
    mlir::registerPassPipeline(
        "qkv-cpu", "The whole qkv CPU pipeline: qkv -> LLVM dialect",
        [reported](mlir::OpPassManager &pm, llvm::StringRef,
                   llvm::function_ref<mlir::LogicalResult(const llvm::Twine &)> error) {
          return reported(buildCpuPipeline(pm), "qkv-cpu", error);
        },
        [](llvm::function_ref<void(const mlir::detail::PassOptions &)>) {});
    for (Stage stage : kCpuPassStages) {
      std::string id = "qkv-cpu-to-" + std::string(stage_name(stage));
      std::string desc = "qkv CPU pipeline, one stage: " + cpuStagePipeline(stage);
      mlir::registerPassPipeline(
          id, desc,
          [reported, stage,
           id](mlir::OpPassManager &pm, llvm::StringRef,
               llvm::function_ref<mlir::LogicalResult(const llvm::Twine &)> error) {
            return reported(buildCpuStage(pm, stage), id, error);
          },
          [](llvm::function_ref<void(const mlir::detail::PassOptions &)>) {});
    }
  });
}

void registerCudaDialects(mlir::DialectRegistry &registry) {
  registry.insert<mlir::gpu::GPUDialect, mlir::NVVM::NVVMDialect, mlir::nvgpu::NVGPUDialect,
                  mlir::ub::UBDialect>();
  // convert-gpu-to-nvvm lowers the other dialects inside a gpu.module through these.
  mlir::arith::registerConvertArithToLLVMInterface(registry);
  mlir::cf::registerConvertControlFlowToLLVMInterface(registry);
  mlir::registerConvertOpenMPToLLVMInterface(registry);
  mlir::registerConvertFuncToLLVMInterface(registry);
  mlir::index::registerConvertIndexToLLVMInterface(registry);
  mlir::registerConvertMathToLLVMInterface(registry);
  mlir::registerConvertMemRefToLLVMInterface(registry);
  mlir::registerConvertNVVMToLLVMInterface(registry);
  mlir::ub::registerConvertUBToLLVMInterface(registry);
  mlir::vector::registerConvertVectorToLLVMInterface(registry);
  mlir::gpu::registerConvertGpuToLLVMInterface(registry);
  mlir::NVVM::registerConvertGpuToNVVMInterface(registry);
  // gpu-module-to-binary: the #nvvm.target serializer (without it, a crash) and the
  // translation of the kernels to LLVM IR.
  mlir::NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  mlir::registerNVVMDialectTranslation(registry);
  mlir::registerGPUDialectTranslation(registry);
}

void registerQkvDialects(mlir::DialectRegistry &registry) {
  registry.insert<QkvDialect, mlir::func::FuncDialect, mlir::arith::ArithDialect,
                  mlir::math::MathDialect, mlir::tensor::TensorDialect, mlir::linalg::LinalgDialect,
                  mlir::scf::SCFDialect, mlir::memref::MemRefDialect,
                  mlir::bufferization::BufferizationDialect, mlir::cf::ControlFlowDialect,
                  mlir::LLVM::LLVMDialect, mlir::affine::AffineDialect, mlir::index::IndexDialect,
                  mlir::vector::VectorDialect, mlir::omp::OpenMPDialect,
                  mlir::x86vector::X86VectorDialect, mlir::amx::AMXDialect>();
  // convert-to-llvm (the amx tier's last conversion) through the dialects' interfaces.
  mlir::registerConvertAMXToLLVMInterface(registry);
  mlir::cf::registerConvertControlFlowToLLVMInterface(registry);
  mlir::registerConvertOpenMPToLLVMInterface(registry);
  mlir::arith::registerBufferizableOpInterfaceExternalModels(registry);
  mlir::arith::registerBufferDeallocationOpInterfaceExternalModels(registry);
  mlir::bufferization::func_ext::registerBufferizableOpInterfaceExternalModels(registry);
  mlir::cf::registerBufferizableOpInterfaceExternalModels(registry);
  mlir::cf::registerBufferDeallocationOpInterfaceExternalModels(registry);
  mlir::linalg::registerBufferizableOpInterfaceExternalModels(registry);
  mlir::memref::registerAllocationOpInterfaceExternalModels(registry);
  mlir::scf::registerBufferizableOpInterfaceExternalModels(registry);
  mlir::scf::registerBufferDeallocationOpInterfaceExternalModels(registry);
  mlir::tensor::registerBufferizableOpInterfaceExternalModels(registry);
  mlir::registerBuiltinDialectTranslation(registry);
  mlir::registerLLVMDialectTranslation(registry);
  mlir::registerOpenMPDialectTranslation(registry);
}

} // namespace qkv::ir
