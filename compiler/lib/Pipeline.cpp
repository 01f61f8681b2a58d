// The CPU and CUDA pipelines as named stages, each built in C++ into a pass manager (its
// text, for --dump-pass-pipeline and the docs, printed from it), and the registration of
// passes, pipelines and dialects.
#include "qkv/compiler/transforms/Passes.h"

#include <qkv/compiler/compile.hpp>
#include <qkv/dsl/error.hpp>
#include <qkv/runtime/env.hpp>

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
#include "mlir/Conversion/Passes.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVM.h"
#include "mlir/Conversion/VectorToSCF/VectorToSCF.h"
#include "mlir/Dialect/AMX/AMXDialect.h"
#include "mlir/Dialect/AMX/Transforms.h"
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
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Index/IR/IndexDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Linalg/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/IR/MemRefMemorySlot.h"
#include "mlir/Dialect/MemRef/Transforms/AllocationOpInterfaceImpl.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/OpenMP/OpenMPDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/BufferDeallocationOpInterfaceImpl.h"
#include "mlir/Dialect/SCF/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/SCF/Transforms/Passes.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/UB/IR/UBOps.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/OpenMP/OpenMPToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"

#include <mutex>

namespace qkv::ir {

namespace {

/// 90 for "sm_90" (0 when it is not of that form).
int chipNumber(llvm::StringRef chip) {
  int n = 0;
  return chip.consume_front("sm_") && !chip.getAsInteger(10, n) ? n : 0;
}

/// One-shot bufferization across function boundaries with identity layouts, results
/// as out-params (the caller allocates; allocations hoisted to it).
void addBufferize(mlir::OpPassManager &pm) {
  mlir::bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      mlir::bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(mlir::bufferization::createEmptyTensorEliminationPass());
  pm.addPass(mlir::bufferization::createOneShotBufferizePass(bufferize));
  pm.addPass(mlir::bufferization::createDropEquivalentBufferResultsPass());
  mlir::bufferization::BufferResultsToOutParamsPassOptions outParams;
  outParams.modifyPublicFunctions = true;
  outParams.hoistStaticAllocs = true;
  outParams.hoistDynamicAllocs = true;
  pm.addPass(mlir::bufferization::createBufferResultsToOutParamsPass(outParams));
}

/// canonicalize then cse, between and after the lowerings. The canonicalizer does not
/// simplify regions (drop dead block arguments, merge identical blocks): the code is in
/// structured loops with one block per region until the llvm stage, so the simplification
/// found nothing in any gallery graph's IR (the same LLVM dialect and PTX either way) and
/// cost about 1.2 ms of `mha`'s cold compile.
void addCanonicalizeCse(mlir::OpPassManager &pm) {
  mlir::GreedyRewriteConfig config;
  config.setRegionSimplificationLevel(mlir::GreedySimplifyRegionLevel::Disabled);
  // The canonicalize pass's own default; GreedyRewriteConfig's is bottom-up, which changes
  // the order of some folds (longformer's loops differ).
  config.setUseTopDownTraversal(true);
  pm.addPass(mlir::createCanonicalizerPass(config));
  pm.addPass(mlir::createCSEPass());
}

void addCudaLinalgAndLoops(mlir::OpPassManager &pm, Stage stage, const CudaPipelineOptions &o) {
  if (stage == Stage::Linalg) {
    LowerAttentionToGpuTilesOptions tiles;
    tiles.mma = chipNumber(o.chip) >= 80; // tensor cores (mma.sync m16n8k16) from sm_80 on
    pm.addPass(createLowerAttentionToGpuTiles(tiles));
    mlir::OpPassManager &fpm = pm.nest<mlir::func::FuncOp>();
    fpm.addPass(createLowerToLinalg());
    fpm.addPass(mlir::createConvertElementwiseToLinalgPass());
    addCanonicalizeCse(pm);
    return;
  }
  mlir::OpPassManager &before = pm.nest<mlir::func::FuncOp>();
  before.addPass(createCopyRepeatedResults());
  before.addPass(createUnshareFills());
  addBufferize(pm);
  pm.addNestedPass<mlir::func::FuncOp>(mlir::createConvertLinalgToParallelLoopsPass());
  pm.addPass(createDeallocateBuffers());
  addCanonicalizeCse(pm);
}

void addCudaGpuStage(mlir::OpPassManager &pm) {
  // Tiling before mapping: the outer loop's dims go to blocks, the tile's to threads
  // (canonicalize would merge the two loops again, so it runs only after the mapping).
  mlir::OpPassManager &fpm = pm.nest<mlir::func::FuncOp>();
  fpm.addPass(createMapTilesToGpu());
  fpm.addPass(createHostToDevice());
  fpm.addPass(mlir::createParallelLoopTilingPass({16, 16}, /*noMinMaxBounds=*/true));
  fpm.addPass(mlir::createGpuMapParallelLoopsPass());
  fpm.addPass(mlir::createConvertParallelLoopToGpuPass());
  pm.addPass(mlir::createCanonicalizerPass());
  pm.addNestedPass<mlir::func::FuncOp>(mlir::createGpuLaunchSinkIndexComputationsPass());
  pm.addPass(mlir::createGpuKernelOutliningPass());
  addCanonicalizeCse(pm);
}

void addCudaNvvmStage(mlir::OpPassManager &pm, const CudaPipelineOptions &o) {
  mlir::GpuNVVMAttachTargetOptions target;
  target.chip = o.chip;
  target.optLevel = 3;
  pm.addPass(mlir::createGpuNVVMAttachTarget(target));
  // The attention kernel's warp-level vector.contract ops become mma.sync (bf16 ones
  // through the f16 path, WarpMmaToNvgpu.cpp) before the rest goes to NVVM.
  mlir::OpPassManager &gm = pm.nest<mlir::gpu::GPUModuleOp>();
  gm.addNestedPass<mlir::gpu::GPUFuncOp>(createWarpMmaToNvgpu());
  gm.addPass(mlir::createConvertNVGPUToNVVMPass());
  gm.addNestedPass<mlir::gpu::GPUFuncOp>(createRestoreBf16Mma());
  gm.addPass(mlir::memref::createFoldMemRefAliasOpsPass());
  gm.addPass(mlir::memref::createExpandStridedMetadataPass());
  gm.addPass(mlir::createLowerAffinePass());
  gm.addPass(mlir::createSCFToControlFlowPass());
  gm.addPass(mlir::createConvertGpuOpsToNVVMOps());
  addCanonicalizeCse(gm);
  gm.addPass(mlir::createReconcileUnrealizedCastsPass());
}

} // namespace

void addCpuLinalgFlash(mlir::OpPassManager &pm, const CpuPipelineOptions &o) {
  LowerAttentionToFlashOptions flash;
  flash.vectorBits = o.vectorBits;
  flash.qTile = o.qTile;
  flash.kvTile = o.kvTile;
  flash.decodeRows = o.decodeRows;
  flash.isaTier = o.isa;
  pm.addPass(createLowerAttentionToFlash(flash));
}

void addCpuLinalgTail(mlir::OpPassManager &pm) {
  // convert-elementwise-to-linalg: the f32 <-> f16/bf16 conversions of half-precision
  // graphs (arith.extf/truncf on tensors, from the import).
  mlir::OpPassManager &fpm = pm.nest<mlir::func::FuncOp>();
  fpm.addPass(createLowerToLinalg());
  fpm.addPass(mlir::createConvertElementwiseToLinalgPass());
  addCanonicalizeCse(pm);
  pm.addNestedPass<mlir::func::FuncOp>(createFuseCasts());
}

namespace {

void addCpuLinalgAndLoops(mlir::OpPassManager &pm, Stage stage, const CpuPipelineOptions &o) {
  if (stage == Stage::Linalg) {
    addCpuLinalgFlash(pm, o);
    addCpuLinalgTail(pm);
    return;
  }
  mlir::OpPassManager &before = pm.nest<mlir::func::FuncOp>();
  before.addPass(createGroupSiblingMatmuls());
  before.addPass(createCopyRepeatedResults());
  before.addPass(createUnshareFills());
  addBufferize(pm);
  LowerMatmulToMicrokernelsOptions gemm;
  gemm.vectorBits = o.vectorBits;
  gemm.l1Bytes = o.l1Bytes;
  gemm.l2Bytes = o.l2Bytes;
  gemm.kc = o.gemmKc;
  gemm.mc = o.gemmMc;
  gemm.isaTier = o.isa;
  gemm.matmulPrecision = o.matmulPrecision;
  pm.addPass(createLowerMatmulToMicrokernels(gemm));
  VectorizeElementwiseOptions elementwise;
  elementwise.vectorBits = o.vectorBits;
  pm.addPass(createVectorizeElementwise(elementwise));
  pm.addNestedPass<mlir::func::FuncOp>(createLinalgToLoops());
  pm.addPass(createDeallocateBuffers());
  // The first cse makes the in-place slice copies of bufferization self-copies, which
  // canonicalize then removes.
  pm.addPass(mlir::createCSEPass());
  addCanonicalizeCse(pm);
}

void addCpuLlvmStage(mlir::OpPassManager &pm, const CpuPipelineOptions &o) {
  // A repeated layer's function takes its weights and activations as pointers and sizes,
  // not descriptors. Then scf.parallel becomes OpenMP; memrefs go to LLVM before scf
  // does, because the alloca scopes OpenMP wraps around each task must still be single
  // blocks then.
  pm.addPass(createMemRefArgsToPointers());
  pm.addPass(createLowerChecks());
  // Without AVX512-BF16 LLVM rounds to bf16 by a call per element.
  if (o.isa == "f32")
    pm.addPass(createExpandBf16Conversions());
  mlir::ConvertSCFToOpenMPPassOptions omp;
  omp.numThreads = static_cast<unsigned>(o.threads);
  pm.addPass(mlir::createConvertSCFToOpenMPPass(omp));
  pm.addPass(createSerializeSmallParallel());
  LowerVectorAndViewsOptions vec;
  vec.outerProduct = o.warpTiles;
  pm.addPass(createLowerVectorAndViews(vec));
  pm.addPass(mlir::createLowerAffinePass());
  // memref.alloc calls MLIR's generic allocation functions, which the JIT binds to the
  // runtime's buffer cache (qkv/runtime/buffer_cache.hpp): no fresh pages per call.
  mlir::FinalizeMemRefToLLVMConversionPassOptions memref;
  memref.useGenericFunctions = true;
  pm.addPass(mlir::createFinalizeMemRefToLLVMConversionPass(memref));
  pm.addNestedPass<mlir::func::FuncOp>(mlir::createSCFToControlFlowPass());
  pm.addPass(mlir::createConvertMathToLLVMPass());
  pm.addPass(createMathToLibm());
  // Everything left (arith, index, func, cf, omp, amx, vector, x86vector) in one
  // conversion, one walk of the module, with one type converter: the AMX tiles a GEMM's or
  // attention's register tile carries through its K loop are block arguments of cf
  // branches by now (attention's inside the OpenMP loop's region), a type only the amx
  // dialect's interface knows. The same LLVM dialect as one pass per dialect, in less time
  // (mha: 30 ms as five passes, 12-13 as one). It takes the dialects' interfaces
  // registered with the context (registerQkvDialects): without func's, a declaration made
  // after the last func conversion (qkv-math-to-libm's f64 erf) stayed func.func.
  pm.addPass(createConvertToLLVM());
  if (o.warpTiles)
    pm.addPass(mlir::createUBToLLVMConversionPass());
  pm.addPass(mlir::createReconcileUnrealizedCastsPass());
}

/// The pass list `add` makes, as text (what --dump-pass-pipeline shows).
std::string pipelineText(llvm::function_ref<bool(mlir::OpPassManager &)> add) {
  mlir::OpPassManager pm(mlir::ModuleOp::getOperationName());
  if (!add(pm))
    return "";
  std::string text;
  llvm::raw_string_ostream os(text);
  pm.printAsTextualPipeline(os);
  // "builtin.module(...)" around the list: the stage's passes alone.
  llvm::StringRef list(text);
  if (list.consume_front("builtin.module(") && list.consume_back(")"))
    return list.str();
  return text;
}

} // namespace

bool addCudaStage(mlir::OpPassManager &pm, Stage stage, const CudaPipelineOptions &o) {
  switch (stage) {
  case Stage::Qkv: {
    CpuPipelineOptions cpu;
    cpu.recognizeAttention = o.recognizeAttention;
    return addCpuStage(pm, Stage::Qkv, cpu);
  }
  case Stage::Linalg:
  case Stage::Loops: addCudaLinalgAndLoops(pm, stage, o); return true;
  case Stage::Gpu: addCudaGpuStage(pm); return true;
  case Stage::Nvvm: addCudaNvvmStage(pm, o); return true;
  case Stage::Ptx: {
    mlir::GpuModuleToBinaryPassOptions binary;
    binary.compilationTarget = "isa";
    binary.toolkitPath = o.toolkit;
    pm.addPass(mlir::createGpuModuleToBinaryPass(binary));
    return true;
  }
  default: return false;
  }
}

bool addCpuStage(mlir::OpPassManager &pm, Stage stage, const CpuPipelineOptions &o) {
  if (o.gpuTiles && (stage == Stage::Linalg || stage == Stage::Loops))
    return addCudaStage(pm, stage, {});
  if (o.gpuTiles && stage == Stage::Llvm) {
    CpuPipelineOptions cpu = o;
    cpu.gpuTiles = false;
    // The warps' tile contractions (mma.sync on the GPU) as vector code: 2-D transfers
    // unrolled, contractions to outer products.
    cpu.warpTiles = true;
    mlir::OpPassManager &fpm = pm.nest<mlir::func::FuncOp>();
    fpm.addPass(createTilesToCpuLoops());
    fpm.addPass(mlir::createConvertVectorToSCFPass(
        mlir::VectorTransferToSCFOptions().enableFullUnroll()));
    return addCpuStage(pm, stage, cpu);
  }
  switch (stage) {
  case Stage::Qkv:
    pm.addPass(mlir::createCanonicalizerPass());
    if (o.recognizeAttention)
      pm.addNestedPass<mlir::func::FuncOp>(createRecognizeAttention());
    pm.addPass(mlir::createCSEPass());
    return true;
  case Stage::Linalg:
  case Stage::Loops: addCpuLinalgAndLoops(pm, stage, o); return true;
  case Stage::Llvm: addCpuLlvmStage(pm, o); return true;
  default: return false;
  }
}

std::unique_ptr<mlir::MLIRContext>
newCompileContext(llvm::function_ref<void(mlir::DialectRegistry &)> more) {
  mlir::DialectRegistry registry;
  registerQkvDialects(registry);
  if (more)
    more(registry);
  auto ctx = std::make_unique<mlir::MLIRContext>(registry, mlir::MLIRContext::Threading::DISABLED);
  ctx->loadAllAvailableDialects();
  return ctx;
}

bool verifyEachPass() {
  static const bool each = env_switch("QKV_VERIFY_EACH").value_or(false);
  return each;
}

namespace {

/// Whether QKV_PASS_TIMING asks for MLIR's pass timing report of each stage (on stderr).
bool passTimingWanted() {
  static const bool wanted = env_switch("QKV_PASS_TIMING").value_or(false);
  return wanted;
}

} // namespace

mlir::LogicalResult runStage(mlir::PassManager &pm, mlir::ModuleOp module) {
  bool each = verifyEachPass();
  pm.enableVerifier(each);
  if (passTimingWanted())
    pm.enableTiming();
  if (mlir::failed(pm.run(module)))
    return mlir::failure();
  return each ? mlir::success() : mlir::verify(module);
}

void runStageOrThrow(mlir::ModuleOp module, llvm::StringRef stage, const std::string &diags,
                     llvm::function_ref<bool(mlir::OpPassManager &)> add, const std::string &what,
                     bool anyDiagnosticFails) {
  mlir::PassManager pm(module.getContext());
  std::string name = stage.str();
  if (!add(pm))
    internal_error("the pipeline has no stage '" + name + "'");
  if (mlir::failed(runStage(pm, module)) || (anyDiagnosticFails && !diags.empty()))
    throw CompileError(name, what + (diags.empty() ? "a pass failed without a diagnostic" : diags));
}

void addCudaHostToLlvm(mlir::OpPassManager &pm) {
  pm.addPass(mlir::memref::createExpandStridedMetadataPass());
  pm.addPass(mlir::createLowerAffinePass());
  // Before gpu-to-llvm, whose own memref patterns would call malloc.
  mlir::FinalizeMemRefToLLVMConversionPassOptions hostMemref;
  hostMemref.useGenericFunctions = true;
  pm.addPass(mlir::createFinalizeMemRefToLLVMConversionPass(hostMemref));
  pm.addPass(mlir::createGpuToLLVMConversionPass());
  pm.addPass(mlir::createSCFToControlFlowPass());
  pm.addPass(mlir::createArithToLLVMConversionPass());
  pm.addPass(mlir::createConvertIndexToLLVMPass());
  pm.addPass(mlir::createConvertFuncToLLVMPass());
  pm.addPass(mlir::createConvertControlFlowToLLVMPass());
  pm.addPass(mlir::createReconcileUnrealizedCastsPass());
}

std::string cudaStagePipeline(Stage stage, const CudaPipelineOptions &o) {
  return pipelineText([&](mlir::OpPassManager &pm) { return addCudaStage(pm, stage, o); });
}

std::string cpuStagePipeline(Stage stage, const CpuPipelineOptions &o) {
  return pipelineText([&](mlir::OpPassManager &pm) { return addCpuStage(pm, stage, o); });
}

mlir::LogicalResult buildCpuStage(mlir::OpPassManager &pm, Stage stage) {
  return mlir::success(addCpuStage(pm, stage, {}));
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
    // A stage the pipeline does not have is reported through qkv-opt's error handler.
    auto reported = [](mlir::LogicalResult built, llvm::StringRef id,
                       llvm::function_ref<mlir::LogicalResult(const llvm::Twine &)> error) {
      return mlir::succeeded(built) ? built : error("qkv: pipeline " + id + " has no such stage");
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
  // convert-to-llvm (the llvm stage's last conversion) through the dialects' interfaces.
  mlir::registerConvertAMXToLLVMInterface(registry);
  mlir::arith::registerConvertArithToLLVMInterface(registry);
  mlir::cf::registerConvertControlFlowToLLVMInterface(registry);
  mlir::registerConvertFuncToLLVMInterface(registry);
  mlir::index::registerConvertIndexToLLVMInterface(registry);
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
