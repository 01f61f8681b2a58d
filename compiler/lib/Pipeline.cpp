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
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/BufferDeallocationOpInterfaceImpl.h"
#include "mlir/Dialect/SCF/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"

#include <mutex>

namespace qkv::ir {

namespace {

/// The stages in order with their pass lists (module-anchored, bare lists).
const std::pair<const char *, const char *> kStages[] = {
    {"qkv", "canonicalize,func.func(qkv-recognize-attention),cse"},
    {"linalg", "func.func(qkv-lower-attention-to-loops,qkv-lower-to-linalg),canonicalize,cse"},
    {"loops", "one-shot-bufferize{bufferize-function-boundaries "
              "function-boundary-type-conversion=identity-layout-map},"
              "buffer-results-to-out-params{modify-public-functions hoist-static-allocs},"
              "func.func(convert-linalg-to-loops),"
              "buffer-deallocation-pipeline,canonicalize,cse"},
    {"llvm", "func.func(convert-scf-to-cf),expand-strided-metadata,lower-affine,"
             "finalize-memref-to-llvm,convert-math-to-llvm,convert-math-to-libm,"
             "convert-arith-to-llvm,convert-index-to-llvm,convert-func-to-llvm,"
             "convert-cf-to-llvm,reconcile-unrealized-casts"},
};

} // namespace

std::string cpuStagePipeline(llvm::StringRef stage) {
  for (const auto &[name, pipeline] : kStages)
    if (stage == name)
      return pipeline;
  return "";
}

void buildCpuStage(mlir::OpPassManager &pm, llvm::StringRef stage) {
  std::string p = cpuStagePipeline(stage);
  if (p.empty() || mlir::failed(mlir::parsePassPipeline(p, pm)))
    llvm::report_fatal_error(llvm::Twine("qkv: bad CPU pipeline stage ") + stage);
}

void buildCpuPipeline(mlir::OpPassManager &pm) {
  for (const auto &[name, pipeline] : kStages)
    buildCpuStage(pm, name);
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
  });
}

void registerQkvPassesAndPipelines() {
  static std::once_flag once;
  std::call_once(once, [] {
    registerQkvPasses();
    mlir::PassPipelineRegistration<>("qkv-cpu", "The whole qkv CPU pipeline: qkv -> LLVM dialect",
                                     [](mlir::OpPassManager &pm) { buildCpuPipeline(pm); });
    for (const auto &[name, pipeline] : kStages) {
      std::string id = std::string("qkv-cpu-to-") + name;
      std::string desc = std::string("qkv CPU pipeline, one stage: ") + pipeline;
      std::string stage = name;
      mlir::PassPipelineRegistration<>(
          id, desc, [stage](mlir::OpPassManager &pm) { buildCpuStage(pm, stage); });
    }
  });
}

void registerQkvDialects(mlir::DialectRegistry &registry) {
  registry
      .insert<QkvDialect, mlir::func::FuncDialect, mlir::arith::ArithDialect,
              mlir::math::MathDialect, mlir::tensor::TensorDialect, mlir::linalg::LinalgDialect,
              mlir::scf::SCFDialect, mlir::memref::MemRefDialect,
              mlir::bufferization::BufferizationDialect, mlir::cf::ControlFlowDialect,
              mlir::LLVM::LLVMDialect, mlir::affine::AffineDialect, mlir::index::IndexDialect>();
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
}

} // namespace qkv::ir
