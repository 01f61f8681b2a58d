// qkv::compile: Graph -> Kernel through the qkv MLIR dialect. MLIR-free header.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <qkv/dsl/graph.hpp>
#include <qkv/runtime/kernel.hpp>

namespace qkv {

/// Where a kernel runs (docs/gpu.md for the CUDA targets).
struct Target {
  enum class Kind {
    /// The host CPU, JIT-compiled in process.
    HostCpu,
    /// An NVIDIA GPU: PTX for `chip`, through the CUDA pipeline (stages qkv, linalg,
    /// loops, gpu, nvvm, ptx; lower_to() prints them without a GPU).
    Cuda,
    /// The CUDA pipeline's kernels before they are mapped to blocks and threads (its
    /// stages qkv, linalg and loops, IR for IR), run on the host CPU: blocks as OpenMP
    /// tasks, a block's threads one after the other. What the tests check the GPU kernels'
    /// logic with on machines without a GPU.
    GpuTilesOnHost,
  } kind = Kind::HostCpu;
  /// Cuda: the GPU architecture, "sm_80" (A100), "sm_90" (H100/H200), ...
  std::string chip;

  static Target host() { return Target{}; }
  static Target cuda(std::string chip = "sm_90") { return Target{Kind::Cuda, std::move(chip)}; }
  static Target gpu_tiles_on_host() { return Target{Kind::GpuTilesOnHost, {}}; }
  /// "host-cpu", "cuda-sm_90", "gpu-tiles-on-host".
  std::string str() const {
    return kind == Kind::HostCpu ? "host-cpu"
           : kind == Kind::Cuda  ? "cuda-" + chip
                                 : "gpu-tiles-on-host";
  }
};

/// How the compiled code is laid out in time and space: tile sizes, vector width and
/// threads. Every setting computes the same result (the interpreter's); 0 means "the
/// compiler's default", chosen for the host.
struct Schedule {
  /// Threads the kernel runs on (OpenMP); 0: all cores (or OMP_NUM_THREADS if set).
  int threads = 0;
  /// Query rows per attention tile (a multiple of the vector width); 0: default.
  int q_tile = 0;
  /// Keys per attention tile; 0: default.
  int kv_tile = 0;
  /// Vector register width in bits (128, 256 or 512); 0: the widest the host has.
  int vector_bits = 0;
  /// The projections' GEMM (docs/compiler.md, "The GEMM"): rows of B per block (its
  /// packed panel's block stays in L1); 0: from the host's L1 data cache size.
  int gemm_k_block = 0;
  /// Most rows of C per GEMM task (their rows of A stay in L2), rounded up to whole
  /// register tiles; 0: from the host's L2 cache size.
  int gemm_m_block = 0;
  /// Attention over at most this many queries takes the split-KV decode kernel instead
  /// of query tiles; a query length bound at run time picks one or the other on each
  /// call (docs/compiler.md, "The fused attention kernel"). 0: one vector of queries, at
  /// most 8 where tiles of one vector take the lengths after it: 8 f32 with AVX2; with
  /// AVX-512, 8 for attention without a mask, 16 with one.
  int decode_rows = 0;
};

/// The on-disk kernel cache (docs/compiler.md, "Kernel cache"): compiled kernels are kept
/// as object code, keyed by the graph, these options, the host CPU and qkv's build, and a
/// later compile of the same thing loads the object instead of compiling. QKV_CACHE=0 in
/// the environment turns it off whatever these say.
struct CacheOptions {
  /// Look for a cached kernel (false: always compile; the result is still stored).
  bool read = true;
  /// Store the compiled kernel (false: nothing is written).
  bool write = true;
  /// The cache folder; empty: $QKV_CACHE_DIR, else ~/.cache/qkv/kernels.
  std::string dir;
  /// The most bytes of entries the folder keeps: after a store, the least recently used
  /// entries (by their files' times; a hit renews its entry's) are removed down to this.
  /// 0: $QKV_CACHE_MAX_MB mebibytes, else kernel_cache::kDefaultMaxBytes (1 GiB).
  std::uint64_t max_bytes = 0;
  /// Neither read nor write.
  static CacheOptions off() { return {false, false, {}, 0}; }
};

/// The instruction-set tiers that products (projections, matmuls, attention's QK^T and
/// P.V) run on, on the CPU (docs/compiler.md, "ISA tiers"). A tier only changes how
/// products whose operands are bf16 are computed (and f32 ones under
/// MatmulPrecision::Medium); every other op is the same code on every tier.
enum class Isa {
  /// The best tier the host has, unless QKV_ISA in the environment names a lower one.
  Host,
  /// f32 FMAs: bf16 and f16 operands are widened to f32 as they are read or packed.
  F32,
  /// AVX512-BF16: bf16 operands are multiplied in pairs by vdpbf16ps with f32
  /// accumulation, twice the FMA's products per instruction.
  Avx512Bf16,
  /// AMX-BF16 (Intel Sapphire Rapids and later): the GEMMs' blocks of bf16 products run
  /// on the tile engine (tdpbf16ps, 16 x 16 x 32 products an instruction) with f32
  /// accumulation; everything else as on Avx512Bf16 (which every AMX host has).
  Amx,
};

/// "host", "f32", "avx512bf16", "amx".
std::string isa_name(Isa isa);
/// The tier a name (as isa_name writes it, or QKV_ISA takes it) names; a qkv::Error for
/// anything else, naming `what` (where the name came from) and the tiers.
Isa parse_isa(const std::string &name, const std::string &what = "isa");
/// The best tier this host's CPU has (never Isa::Host).
Isa host_isa();
/// The tiers this host's CPU has, lowest first ("f32", then "avx512bf16" and "amx" where
/// they run).
std::vector<Isa> host_isas();

/// How f32 graphs' products are computed, as torch.set_float32_matmul_precision names it.
enum class MatmulPrecision {
  /// f32 products on f32 FMAs (the interpreter's semantics, to f32 rounding).
  Highest,
  /// The projections' and matmuls' f32 operands are rounded to bf16 and multiplied on the
  /// tier's bf16 engine with f32 accumulation (on the f32 tier: as Highest). Each product
  /// then carries bf16's rounding of its operands: a relative error of about 2^-8 per
  /// product, docs/compiler.md "ISA tiers". Attention stays f32.
  Medium,
};

/// How to compile (never what: that is the graph).
struct CompileOptions {
  /// Tiles, vector width, threads.
  Schedule schedule;
  /// Fuse attention written as matmul/softmax/matmul into one qkv.attention.
  bool recognize_attention = true;
  /// Compile each run of structurally identical layers (<qkv/dsl/repeats.hpp>) as one
  /// function, called once per layer, so that a model written as one graph compiles in
  /// the time of its distinct layers, not of its depth. Not in a checked kernel that
  /// checks some site (a failed check names its own layer's op).
  bool share_repeated_layers = true;
  /// LLVM optimisation level for the JIT (0-3).
  int opt_level = 3;
  /// Threads LLVM's optimiser and code generator use: the kernel's module is split into
  /// up to this many parts (its OpenMP task bodies spread over them), each compiled on
  /// its own thread and linked back together. 0: the host's hardware threads, at most 4.
  /// The kernel computes the same either way; the object code differs, so the cache keys
  /// it.
  int compile_threads = 0;
  /// Compile the attention schedules a query length bound at run time takes below its
  /// longest tiles (the decode kernel, the short tiles), and the GEMMs' skinny functions
  /// (tasks of a few rows) where the rows are bound at run time, when a call first needs
  /// each, on that call, instead of with the rest: a cold compile then compiles the code a
  /// long length runs, and a call that first takes another schedule pays for lowering and
  /// compiling its code (60-180 ms for mha's on a 2-core AMX host; docs/compiler.md,
  /// "Deferred schedules"). false: everything now (a server that wants no compile inside
  /// its first calls). A compile that prints or keeps a stage (QKV_DUMP, dump, Kernel::ir)
  /// and an ahead-of-time bundle compile everything either way.
  bool defer_schedules = true;
  /// Stages to print to stderr as compilation passes through them, in addition to the
  /// ones named by the QKV_DUMP environment variable (e.g. QKV_DUMP=qkv,llvm or all).
  /// Stages named here or by QKV_DUMP are printed by a real compile: the cache is not
  /// read when any are (the kernel is still stored).
  std::vector<std::string> dump;
  /// The on-disk kernel cache.
  CacheOptions cache;
  /// Checks in compiled code (qkv/runtime/checks.hpp): a load a mod makes from a captured
  /// tensor out of its bounds, or an integer division by 0 in a mod, makes Kernel::run
  /// throw the interpreter's error instead of reading past the tensor. Sites proved safe
  /// from the dims when compiling carry no check, so a graph whose sites are all proved
  /// (every gallery graph) runs the unchecked kernel. Unset, the default: checked for
  /// Target::host(), unless QKV_CHECKED=0 is in the environment (QKV_CHECKED=1 keeps it
  /// on); the GPU targets carry no checks. true: checked (an error for a GPU target).
  /// false: unchecked, whatever QKV_CHECKED says; an index out of bounds then reads
  /// whatever lies there (docs/compiler.md, "Checked kernels").
  std::optional<bool> checked;
  /// The tier products run on (Isa::Host: the best the host has, or QKV_ISA). A tier the
  /// host's CPU lacks is a qkv::Error. Part of the kernel cache's key.
  Isa isa = Isa::Host;
  /// f32 products on bf16 engines (Medium) or not (Highest, the default).
  MatmulPrecision matmul_precision = MatmulPrecision::Highest;
};

/// A compilation failure: which stage failed and what MLIR/LLVM said.
class CompileError : public Error {
public:
  CompileError(std::string stage, std::string diagnostics);
  const std::string &stage() const { return stage_; }
  const std::string &diagnostics() const { return diagnostics_; }

private:
  std::string stage_, diagnostics_;
};

/// Compiles g for target. Verifies the graph (qkv::Error on a bad one); a failure inside
/// the pipeline is a CompileError naming the stage. Target::cuda() needs a GPU and its
/// driver: without them a qkv::Error that starts "no CUDA device" and says why; with them
/// the kernels are loaded on device 0 and run() copies inputs and outputs (docs/gpu.md).
Kernel compile(const Graph &g, const Target &target = Target::host(),
               const CompileOptions &options = {});

/// The IR of compiling g for `target` at `stage`, made without running anything (so a
/// CUDA target needs no GPU): for Target::cuda(chip) the stages graph, qkv, linalg,
/// loops, gpu, nvvm and ptx (the PTX text of every kernel); for the host targets what
/// compile(g, target, options).ir(stage) gives.
std::string lower_to(const Graph &g, const Target &target, Stage stage,
                     const CompileOptions &options = {});
std::string lower_to(const Graph &g, const Target &target, const std::string &stage,
                     const CompileOptions &options = {});

/// The GPU architectures Target::cuda() takes: sm_70, sm_75, sm_80, sm_86, sm_87, sm_89,
/// sm_90.
const std::vector<std::string> &cuda_chips();
/// The chip to compile for a device of architecture `arch` (cuda::Device::arch()): `arch`
/// when it is one of cuda_chips(), else sm_90, whose PTX the driver compiles for a newer
/// GPU.
std::string cuda_chip_for(const std::string &arch);

/// Compiles independent graphs at once (a model's embedding, layer and head kernels): up
/// to options.compile_threads graphs at a time (0: the host's hardware threads, at most
/// 4), each as compile() would. The kernels come back in the order of `graphs`; when
/// compiles fail, the first failing graph's error is thrown once all have finished.
std::vector<Kernel> compile_all(const std::vector<Graph> &graphs,
                                const Target &target = Target::host(),
                                const CompileOptions &options = {});

/// The pass list of a CPU pipeline stage (qkv, linalg, loops, llvm), as qkv-opt takes it,
/// for the default schedule on this host, or for `schedule`.
std::string cpu_stage_pipeline(const std::string &stage);
std::string cpu_stage_pipeline(const std::string &stage, const Schedule &schedule);

/// The vector register width the host's widest ISA has: 512 (AVX-512), 256 (AVX2 with
/// FMA) or 128.
int host_vector_bits();

/// The size in bytes of one core's data cache at `level` (1 or 2) as Linux reports it
/// (sysfs, else sysconf); when it does not, 32 KiB for L1 and 512 KiB for L2. The GEMM's
/// blocks are derived from them (docs/compiler.md, "The GEMM"). Read once per process.
std::int64_t host_cache_bytes(int level);

} // namespace qkv
