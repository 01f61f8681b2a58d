// qkv passes and named pipelines (internal: includes MLIR headers).
#pragma once

#include "mlir/Dialect/AMX/AMXDialect.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

#include "qkv/compiler/ir/QkvDialect.h"
#include <qkv/runtime/stage.hpp>

namespace qkv::ir {

#define GEN_PASS_DECL
#include "qkv/compiler/transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "qkv/compiler/transforms/Passes.h.inc"

/// The CPU pipeline's stages, in order. Each stage's passes take the module from the
/// previous stage's IR to this one's; "qkv" starts from freshly imported IR.
///   qkv    canonicalize, recognise attention
///   linalg qkv ops -> linalg/tensor/arith/math, attention -> the fused flash kernel
///   loops  bufferize (one-shot), results -> out-params, deallocation, linalg -> loops
///   llvm   everything -> the LLVM dialect
/// With the default options; fails when `stage` is not one of kCpuPassStages.
mlir::LogicalResult buildCpuStage(mlir::OpPassManager &pm, Stage stage);

/// The schedule knobs the CPU pipeline's passes take (CompileOptions::schedule, resolved
/// for the host): vector width, attention tiles, threads (0: OpenMP's default).
struct CpuPipelineOptions {
  int64_t vectorBits = 512;
  int64_t qTile = 0, kvTile = 0, decodeRows = 0;
  int64_t threads = 0;
  /// The GEMM's blocking: cache sizes and overrides (0: derived from the caches).
  int64_t l1Bytes = 32768, l2Bytes = 524288, gemmKc = 0, gemmMc = 0;
  /// The tier products run on ("f32", "avx512bf16", "amx") and how f32 products are computed
  /// ("highest", "medium"): CompileOptions::isa, matmul_precision.
  std::string isa = "f32", matmulPrecision = "highest";
  /// Target::gpu_tiles_on_host(): the CUDA pipeline's linalg and loops stages, then the
  /// tiles as CPU loops (qkv-tiles-to-cpu-loops) and this pipeline's llvm stage.
  bool gpuTiles = false;
  /// The llvm stage also lowers the GPU tiles' warp-level vector code: contractions (which
  /// may read f16/bf16 and accumulate f32) as outer products, and the ub.poison the
  /// unrolled transfers start from.
  bool warpTiles = false;
  /// CompileOptions::recognize_attention: the qkv stage's qkv-recognize-attention.
  bool recognizeAttention = true;
};

/// The CUDA pipeline's knobs: the chip and the CUDA toolkit whose libdevice is linked
/// into the kernels ("" for none: math functions then stay unresolved in the PTX).
struct CudaPipelineOptions {
  std::string chip = "sm_90";
  std::string toolkit;
  /// CompileOptions::recognize_attention, as on the CPU.
  bool recognizeAttention = true;
};
/// The CUDA pipeline's stages, in order (docs/gpu.md):
///   qkv    as on the CPU
///   linalg qkv ops -> linalg etc., attention -> the tiled GPU kernel (scf.forall blocks
///          and threads, not yet mapped)
///   loops  bufferized, linalg -> scf.parallel loops
///   gpu    tiles -> gpu.launch, host buffers -> device buffers, loops -> kernels,
///          kernels outlined into gpu.modules
///   nvvm   the kernels in the NVVM dialect, for the chip
///   ptx    gpu.binary ops holding each module's PTX
/// Adds the passes of one of kCudaPassStages to `pm` (a builtin.module pass manager);
/// false for any other stage.
bool addCudaStage(mlir::OpPassManager &pm, Stage stage, const CudaPipelineOptions &o = {});
/// The host side of a CUDA kernel, after its ptx stage, to the LLVM dialect (launches
/// through the GPU runtime calls, allocations through the buffer cache).
void addCudaHostToLlvm(mlir::OpPassManager &pm);
/// The same passes as text, as --dump-pass-pipeline prints them ("" for any other stage).
std::string cudaStagePipeline(Stage stage, const CudaPipelineOptions &o = {});
/// Registers what the CUDA pipeline adds to registerQkvDialects: the GPU, NVVM and NVGPU
/// dialects, their LLVM conversions and translations and the NVVM target.
void registerCudaDialects(mlir::DialectRegistry &registry);
/// Adds the passes of one of kCpuPassStages to `pm` (a builtin.module pass manager),
/// built in C++ with each pass's options struct; false for any other stage.
bool addCpuStage(mlir::OpPassManager &pm, Stage stage, const CpuPipelineOptions &o = {});
/// The `linalg` stage in its two parts: qkv-lower-attention-to-flash, and the passes that
/// lower the rest (to linalg, canonicalize, CSE, cast fusion). A JIT compile takes the
/// deferred attention schedules out between the two (docs/compiler.md, "Deferred
/// schedules"), and lowers a schedule from the tail on when a call first needs it.
void addCpuLinalgFlash(mlir::OpPassManager &pm, const CpuPipelineOptions &o);
void addCpuLinalgTail(mlir::OpPassManager &pm);
/// The same passes as text, as --dump-pass-pipeline prints them ("" for any other stage).
std::string cpuStagePipeline(Stage stage, const CpuPipelineOptions &o = {});
/// Runs a stage's passes (`pm`) on `module` as a compile does: the IR verified once, after
/// the stage's last pass, as LLVM's pipelines verify where they start and end (the verifier
/// after every pass was a fifth to a quarter of a cold compile; docs/compiler.md, "The CPU
/// pipeline"). With QKV_VERIFY_EACH=1, after every pass instead, which names the pass that
/// broke the IR. Fails with the verifier's or the failing pass's diagnostic.
mlir::LogicalResult runStage(mlir::PassManager &pm, mlir::ModuleOp module);
/// Runs the passes `add` puts into a fresh pass manager on `module` with runStage, as the
/// stage named `stage` (a Stage's name, or the CUDA pipeline's "host"). `add` returning false is an
/// internal error (no such stage); a failed stage throws qkv::CompileError(stage, what + the
/// diagnostics collected in `diags`), as does, with `anyDiagnosticFails`, a stage whose passes
/// succeeded but reported an error (some conversions do).
void runStageOrThrow(mlir::ModuleOp module, llvm::StringRef stage, const std::string &diags,
                     llvm::function_ref<bool(mlir::OpPassManager &)> add,
                     const std::string &what = "", bool anyDiagnosticFails = false);
/// Whether QKV_VERIFY_EACH asks for the verifier after every pass (read once).
bool verifyEachPass();
/// The context of one compile: the CPU pipeline's dialects and interfaces
/// (registerQkvDialects) and those `more` adds (the CUDA pipeline's), registered and loaded;
/// single-threaded (a compile's parallelism is LLVM's parts, and compile_all runs compiles
/// side by side).
std::unique_ptr<mlir::MLIRContext>
newCompileContext(llvm::function_ref<void(mlir::DialectRegistry &)> more = {});
/// All stages: the `qkv-cpu` pipeline.
mlir::LogicalResult buildCpuPipeline(mlir::OpPassManager &pm);
/// Registers the qkv passes and the named pipelines (qkv-cpu, qkv-cpu-to-linalg, ...).
void registerQkvPassesAndPipelines();
/// Registers the upstream passes the pipelines name (canonicalize, one-shot-bufferize,
/// the conversions). qkv-opt registers all upstream passes itself instead.
void registerUpstreamPassesUsedByQkv();
/// Registers every dialect the CPU pipeline uses, plus their interfaces.
void registerQkvDialects(mlir::DialectRegistry &registry);

} // namespace qkv::ir
