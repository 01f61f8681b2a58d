//===- Passes.td - qkv passes ------------------------------------------------------===//
// Each pass does one thing and says so in its name.
#ifndef QKV_PASSES_TD
#define QKV_PASSES_TD

include "mlir/Pass/PassBase.td"

def RecognizeAttention : Pass<"qkv-recognize-attention", "::mlir::func::FuncOp"> {
  let summary = "Fuse matmul(q, k^T) -> [scale] -> [score_mod] -> [mask] -> softmax -> "
                "matmul(., v) into one qkv.attention";
  let description = [{
    Users who write attention the seeds' way (three matmuls and a softmax) get the same
    fused op as users who call attention(q, k, v). The chain must be exactly that
    order, the softmax over the last axis, and each intermediate used only by the next
    step; anything else is left alone (it still runs, unfused).
  }];
  let dependentDialects = ["::qkv::ir::QkvDialect"];
}

def LowerToLinalg : Pass<"qkv-lower-to-linalg", "::mlir::func::FuncOp"> {
  let summary = "Lower every qkv op except attention to linalg/tensor/arith/math";
  let dependentDialects = ["::mlir::linalg::LinalgDialect", "::mlir::tensor::TensorDialect",
                           "::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
                           "::mlir::scf::SCFDialect"];
}

def CopyRepeatedResults : Pass<"qkv-copy-repeated-results", "::mlir::func::FuncOp"> {
  let summary = "Return a copy for each repeat of a value the function already returns";
  let description = [{
    A graph may output one value under two names, or canonicalisation may fold one
    output into another (a no-op transpose, a scale by 1). buffer-results-to-out-params
    needs one buffer per result: a buffer returned twice crashed it. Runs right before
    bufferization, after the last CSE, so that the copies stay distinct.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect", "::mlir::tensor::TensorDialect"];
}

def FuseCasts : Pass<"qkv-fuse-casts", "::mlir::func::FuncOp"> {
  let summary = "Fuse a half-precision graph's widenings and roundings into the "
                "elementwise ops around them";
  let description = [{
    A cast (a generic that only converts its one input, extf/truncf) fuses into every
    generic that reads it; an elementwise generic with a single use fuses into the cast
    that reads it. Upstream's elementwise fusion does the work; its control function
    allows nothing else, so graphs without f16/bf16 are unchanged and a matmul keeps
    its elementwise consumer as the GEMM's epilogue. Casts move through slices first: a
    slice of a widening is the widening of the slice, and the rounding of a tensor
    assembled by insert_slice (its only use) the assembly of the rounded parts. The
    same bits are computed.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect", "::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
}

def GroupSiblingMatmuls : Pass<"qkv-group-sibling-matmuls", "::mlir::func::FuncOp"> {
  let summary = "Move the matmuls of one input next to each other, so that they lower "
                "as one GEMM";
  let description = [{
    qkv-lower-matmul-to-microkernels runs consecutive matmuls of one A as one GEMM (Q, K
    and V of one input). A graph that computes Q's RoPE before K's projection has them
    apart: on tensors, a later matmul of the same A (same op, same block) moves up to
    right after the group's last member, with the side-effect-free ops it depends on
    (upstream's moveOperationDependencies). Not moved: a matmul that depends on a member,
    or, when other work lies between them, where the move would separate the member
    before it or itself from the elementwise op that reads its result (the GEMM's
    epilogue, worth more than one fork and join). Runs before bufferization.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def UnshareFills : Pass<"qkv-unshare-fills", "::mlir::func::FuncOp"> {
  let summary = "Give each op that writes into a filled tensor a fill of its own, and "
                "each matmul's bias start an empty tensor of its own";
  let description = [{
    CSE merges the identical `linalg.fill`s (say of zeros) that several matmuls start
    from into one; one-shot bufferization then gives the fill one buffer and copies it
    into a fresh one for every other writer (a memref.copy per projection, and the
    output written into a temporary). Cloning the fill, and its `tensor.empty`, for every
    destination (`outs`) use after the first (for every one, when the fill is also read)
    lets each writer fill and write a buffer of its own, and buffer-results-to-out-params then hoists the result's buffer into the
    output argument: results are written in place. A matmul's other start (a
    linalg.generic broadcasting its bias into a tensor.empty that CSE shared) gets an
    empty of its own too: else bufferization may reuse one buffer for the C of several
    matmuls whose results die early (a bf16 graph's products, each rounded at once), and
    no GEMM can take its rounding as its epilogue. Runs right before bufferization,
    after the last CSE.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect", "::mlir::tensor::TensorDialect"];
}

def ExpandBf16Conversions : Pass<"qkv-expand-bf16-conversions", "::mlir::ModuleOp"> {
  let summary = "Widen and round bf16 with integer ops where the CPU has no bf16 converts";
  let description = [{
    Without AVX512-BF16 (the f32 tier), LLVM lowers each `arith.truncf` f32 -> bf16, scalar
    or vector, to a call of `__truncsfbf2` per element: a bf16 graph's every rounded
    result (an attention's output, a projection's epilogue) paid a call per value. Upstream's
    `arith::populateExpandBFloat16Patterns` rewrites `truncf` to bf16 (round to nearest even,
    NaN to a quiet NaN) and `extf` from bf16 as bitcasts, shifts, adds and selects on
    integers of the same shape, which LLVM vectorizes. Upstream's `arith-expand` pass would
    also rewrite every other op it knows (maximumf, minimumf, ceildivsi, ...), which the
    rest of the pipeline lowers as it is; this pass applies the bf16 patterns alone.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

def SerializeSmallParallel : Pass<"qkv-serialize-small-parallel", "::mlir::ModuleOp"> {
  let summary = "Run an OpenMP parallel region on the calling thread when its loop does "
                "less work than a fork and join cost";
  let description = [{
    After convert-scf-to-openmp. An `omp.parallel` whose one `omp.wsloop` nest's body has
    a work count (its ops, a scf.for of constant bounds counted as its trips times its
    body, an scf.if as its larger branch) gets the clause `if(trips * work >= min-work)`,
    the trips computed at run time from the nest's bounds: below it the region runs on
    the calling thread (libomp's serialized parallel, no fork, no barrier). A body that
    calls a function or runs a loop of unknown length (a GEMM's tasks, attention's key
    tiles) counts as worth its threads, and its region is left as it is, as is one that
    has an if clause already.
  }];
  let options = [
    Option<"minWork", "min-work", "int64_t", "4096",
           "Fewest counted ops (trips times work per trip) worth a fork">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
}

def MemRefArgsToPointers : Pass<"qkv-memref-args-to-pointers", "::mlir::ModuleOp"> {
  let summary = "A private function's identity-layout memref arguments passed as their "
                "aligned pointer and dynamic sizes";
  let description = [{
    First in the `llvm` stage. A private function with a body whose symbol only
    `func.call`s use (a repeated layer's function, called once per layer; a deferred
    schedule) takes each memref argument of identity layout in the default memory space
    (a layer's weights, its activations, its packed weight panels) as an `!llvm.ptr`, its
    aligned pointer, followed by its dynamic sizes, instead of the 3 + 2 * rank values of
    a memref descriptor: the function rebuilds the descriptor from them (the pointer as
    both allocated and aligned one, offset 0, the strides of a row-major array), as the
    bare-pointer calling convention does for static shapes, and each call passes those
    parts of its operand. An identity layout means offset 0 and contiguous rows, so
    nothing else of the descriptor carries information. Other arguments, and those the
    function deallocates, are left alone. A 24-layer encoder's entry passed 94 values to
    each of its 24 calls of its layer (30 now), each loaded from its own arguments'
    descriptors: straight-line code that LLVM optimised and generated, in one part.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def LowerVectorAndViews : Pass<"qkv-lower-vector-and-views", "::mlir::ModuleOp"> {
  let summary = "Vector ops to their 1-D forms and memref views to strided metadata, in "
                "one greedy walk, before the conversion to LLVM";
  let description = [{
    In the `llvm` stage, after `qkv-serialize-small-parallel`. Applies, in one greedy
    walk of the module, the vector lowering patterns that upstream's
    `convert-vector-to-llvm` applies before its conversion (contractions, broadcasts,
    masks, transposes, shape casts, strided slices, 1-D transfers, rank-reducing FMAs, as
    that pass does with its defaults) and `expand-strided-metadata`'s patterns (subviews,
    reinterpret casts and collapses to `memref.extract_strided_metadata` and offsets
    computed with `affine.apply`, which `lower-affine` then lowers). The walk does not
    simplify regions: the module was canonicalized at the end of the `loops` stage. The
    vector ops left are converted by `qkv-convert-to-llvm`. Upstream's two passes took
    11.2 ms of `mha`'s cold compile (`convert-vector-to-llvm` 6.8, of which 5 converting,
    `expand-strided-metadata` 4.4, walking the module after the vector conversion had
    grown it); this pass takes 1.5, the closing conversion 3.4 -> 8.5.
  }];
  let options = [
    Option<"outerProduct", "outer-product", "bool", /*default=*/"false",
           "vector.contract to vector.outerproduct (the GPU tiles run on the host) "
           "instead of dot products">,
  ];
  let dependentDialects = ["::mlir::affine::AffineDialect", "::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect", "::mlir::vector::VectorDialect"];
}

def ConvertToLLVM : Pass<"qkv-convert-to-llvm", "::mlir::ModuleOp"> {
  let summary = "Everything left to the LLVM dialect in one conversion: each loaded "
                "dialect's interface, vector's and x86vector's patterns with qkv's options";
  let description = [{
    The `llvm` stage's last conversion. Collects the conversion patterns of every loaded
    dialect that implements `ConvertToLLVMPatternInterface` (arith, index, func, cf,
    omp, amx: registered with the context by the CPU pipeline), as upstream
    `convert-to-llvm` does, except vector's: those are added here with reductions LLVM
    may reassociate and 32-bit mask indices (vector's interface takes no options, and its
    defaults would make every `vector.reduction` an ordered chain), together with the
    1-D transfer lowerings and x86vector's intrinsics (`x86vector.avx512.dot`, which has
    no interface). One `applyPartialConversion`, one type converter (the `!amx.tile`
    block arguments of the amx tier need amx's type conversion in the same walk as `cf`),
    one walk of the module instead of convert-vector-to-llvm's conversion and then this.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def LinalgToLoops : Pass<"qkv-linalg-to-loops", "::mlir::func::FuncOp"> {
  let summary = "The linalg ops a function has left to scf.parallel loops "
                "(convert-linalg-to-parallel-loops), none looked at in a function without any";
  let description = [{
    After the GEMM and elementwise lowerings. Runs the upstream
    `convert-linalg-to-parallel-loops` on a function that still holds a linalg op (a
    matmul whose rows are not contiguous, a generic with no vector form) and leaves any
    other alone: the upstream pass's greedy driver folds every op of the function even
    when it lowers nothing (8.5 ms of `mha`'s cold compile, which has none left).
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect", "::mlir::affine::AffineDialect",
                           "::mlir::memref::MemRefDialect", "::mlir::arith::ArithDialect"];
}

def MathToLibm : Pass<"qkv-math-to-libm", "::mlir::ModuleOp"> {
  let summary = "The math ops convert-math-to-llvm left (f64 erf) to libm calls "
                "(convert-math-to-libm), in a module that has any";
  let description = [{
    After `convert-math-to-llvm`. Runs the upstream `convert-math-to-libm` on a module that
    still holds an op of the math dialect and leaves any other alone: the upstream
    conversion walks the whole module even when it finds nothing (8 ms of `mha`'s cold
    compile).
  }];
  let dependentDialects = ["::mlir::func::FuncDialect", "::mlir::vector::VectorDialect",
                           "::mlir::arith::ArithDialect", "::mlir::LLVM::LLVMDialect"];
}

def DeallocateBuffers : Pass<"qkv-deallocate-buffers", "::mlir::ModuleOp"> {
  let summary = "Free bufferization's heap buffers at the end of their function";
  let description = [{
    After bufferization. When every `memref.alloc` is in its function's entry block (of a
    single-block function) and nothing made from it (a view, a cast) leaves the function
    (as a terminator's operand: returned or yielded; or as an operand of a call that
    returns something), a `memref.dealloc` before the function's return frees each one:
    where `buffer-deallocation-pipeline` puts them for such functions, at a tenth of its
    compile time (it runs canonicalize three times over the whole module). A module with
    any other allocation, or with a dealloc or realloc already, gets the upstream
    `buffer-deallocation-pipeline` instead.
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def LowerAttentionToFlash : Pass<"qkv-lower-attention-to-flash", "::mlir::ModuleOp"> {
  let summary = "Lower qkv.attention to a fused, tiled, vectorized, parallel kernel";
  let description = [{
    FlashAttention-2 on the CPU. A tile of queries (q-tile rows, transposed so that
    vectors run along queries) stays resident while key/value tiles (kv-tile keys) stream
    through: scores by a register-tiled vector micro-kernel, the mods inlined and
    vectorized, an online softmax (running max and sum per query, exp2 by a polynomial),
    P.V by the same micro-kernel, one division at the end. No L x S tensor exists. The
    mask region is evaluated on intervals per tile: empty tiles are skipped, full tiles
    run without mask code. Tasks (b, h, query tile) are an scf.parallel. Few queries
    (at most decode-rows) take the split-KV decode kernel instead: the keys are split
    across tasks and the partial results merged by log-sum-exp. A query length bound at
    run time gets every kernel behind scf.ifs on the length; all but the last (the
    longest tiles) are outlined into private functions `qkv_deferred_schedule_<slot>`,
    called with the values they use, which a JIT compile defers to the first call that
    takes them.
  }];
  let options = [
    Option<"vectorBits", "vector-bits", "int64_t", "512",
           "Vector register width in bits (512 for AVX-512, 256 for AVX2)">,
    Option<"qTile", "q-tile", "int64_t", "0",
           "Query rows per tile, a multiple of the vector lanes (0: 4 vectors)">,
    Option<"kvTile", "kv-tile", "int64_t", "0",
           "Keys per tile (0: as many as the query tile with a mask; without one, the query tile rounded up to whole register tiles of the score kernel)">,
    Option<"decodeRows", "decode-rows", "int64_t", "0",
           "Attention with at most this many queries takes the split-KV decode kernel (0: one vector of queries); a dynamic query length gets both kernels and picks one per call">,
    Option<"isaTier", "isa", "std::string", "\"f32\"",
           "The tier bf16 attention's products run on: f32 (widened loads, FMA), avx512bf16 (bf16 pairs on vdpbf16ps, f32 accumulation) or amx (the tiled kernel's products on AMX tiles where its tiles are whole blocks of 32, else as avx512bf16)">,
  ];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect", "::mlir::scf::SCFDialect", "::mlir::memref::MemRefDialect",
                           "::mlir::vector::VectorDialect", "::mlir::func::FuncDialect",
                           "::mlir::bufferization::BufferizationDialect",
                           "::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
                           "::mlir::tensor::TensorDialect", "::mlir::x86vector::X86VectorDialect",
                           "::mlir::amx::AMXDialect"];
}

def LowerMatmulToMicrokernels
    : Pass<"qkv-lower-matmul-to-microkernels", "::mlir::ModuleOp"> {
  let summary = "Lower linalg.matmul/batch_matmul on buffers to a blocked, packed GEMM";
  let description = [{
    The projections and other contractions, after bufferization, as BLAS libraries do
    them: B is packed into panels of nr columns (`qkv_gemm_pack_b_<T>_<nr>`, parallel
    over panels, into a scratch buffer freed after the matmul), and parallel tasks over
    (batch, block of at most mc rows, range of panels) call the block function
    (`qkv_gemm_block_<T>_<mr>x<nr>_k<kc>`): for each block of kc rows of B, every
    mr x nr register tile of the task's rows and panels (the attention kernel's
    micro-kernel: a tile of C in vector registers across the block, broadcasts of A,
    vectors of packed B); tiles at the edges of C read and write under masks. The
    functions are private to the module, made once, and shared by all its matmuls.
    kc and mc come from the L1 and L2 data cache sizes (or the `kc`/`mc` options). The
    number of column ranges is read from OpenMP at run time (omp_get_max_threads): one
    when the row blocks already divide among the threads, else one per thread.
    Matmuls whose A, B or C rows are not contiguous are left for
    convert-linalg-to-parallel-loops.
  }];
  let options = [
    Option<"vectorBits", "vector-bits", "int64_t", "512",
           "Vector register width in bits (512 for AVX-512, 256 for AVX2)">,
    Option<"l1Bytes", "l1-bytes", "int64_t", "32768", "L1 data cache size in bytes">,
    Option<"l2Bytes", "l2-bytes", "int64_t", "524288", "L2 cache size in bytes">,
    Option<"kc", "kc", "int64_t", "0", "Rows of B per block (0: from l1-bytes)">,
    Option<"mc", "mc", "int64_t", "0", "Most rows of C per task (0: from l2-bytes)">,
    Option<"isaTier", "isa", "std::string", "\"f32\"",
           "The tier contractions of bf16 operands run on: f32 (widened, FMA), avx512bf16 (bf16 pairs on vdpbf16ps, f32 accumulation) or amx (blocks on AMX tiles, tdpbf16ps; a few rows on vdpbf16ps)">,
    Option<"matmulPrecision", "precision", "std::string", "\"highest\"",
           "f32 operands: highest (f32 FMA) or medium (rounded to bf16 and run on the isa's bf16 tier, f32 accumulation)">,
  ];
  let dependentDialects = ["::mlir::scf::SCFDialect", "::mlir::memref::MemRefDialect",
                           "::mlir::vector::VectorDialect", "::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect", "::mlir::LLVM::LLVMDialect",
                           "::mlir::x86vector::X86VectorDialect", "::mlir::amx::AMXDialect"];
}

def VectorizeElementwise
    : Pass<"qkv-vectorize-elementwise", "::mlir::ModuleOp"> {
  let summary = "Lower elementwise and innermost-reduction linalg.generic ops on buffers to "
                "vector loops";
  let description = [{
    After bufferization, every linalg.generic of the form VectorizedGeneric handles
    (elementwise ops with broadcasts; or a reduction along the innermost loop, such as a
    norm's sum or a softmax's max, combined by addf, mulf, maximumf, minimumf, maxnumf or
    minnumf) becomes a scf.parallel over its outer loops (OpenMP tasks later; a
    generic of one loop stays one sequential loop) whose body runs the innermost loop in
    vectors of `vector-bits` (for the widest element type of the op), the last vector
    under a mask. A reduction keeps one vector of partial results and reduces it at the
    end of the row, then combines it with the output. Other generics are left for
    convert-linalg-to-parallel-loops.
  }];
  let options = [
    Option<"vectorBits", "vector-bits", "int64_t", "512",
           "Vector register width in bits (512 for AVX-512, 256 for AVX2)">,
  ];
  let dependentDialects = ["::mlir::scf::SCFDialect", "::mlir::memref::MemRefDialect",
                           "::mlir::vector::VectorDialect", "::mlir::arith::ArithDialect"];
}

def LowerChecks : Pass<"qkv-lower-checks", "::mlir::ModuleOp"> {
  let summary = "Turn a checked compile's qkv.check ops into calls of qkv_check_failed";
  let description = [{
    Each `qkv.check %ok, site N [values]` becomes `scf.if` on `not %ok` around a call of
    the runtime's `qkv_check_failed(N, count, v0, ..., v15)` (i64 arguments; slots past
    the count are 0). The function is declared once per module. A module without checks
    is left as it is.
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect", "::mlir::func::FuncDialect",
                           "::mlir::arith::ArithDialect"];
}

def LowerAttentionToGpuTiles : Pass<"qkv-lower-attention-to-gpu-tiles", "::mlir::ModuleOp"> {
  let summary = "Lower qkv.attention to the CUDA pipeline's tiled kernel, before mapping";
  let description = [{
    An scf.forall over (query tile, head, batch) mapped to GPU blocks; inside it,
    scf.foralls of q-tile iterations mapped to the block's threads (one query row each),
    run one after the other: initialise the running max, sum and accumulator; per tile of
    kv-tile keys, copy the key and value rows into the block's buffers, then score each
    row against them (mods inlined, scalar) with an online-softmax step; divide and write.
    Buffers marked `qkv.workgroup` are the block's (shared memory on a GPU). Nothing here
    is GPU-only: qkv-tiles-to-cpu-loops runs the same IR on the CPU, where the tests
    check it against the interpreter. The head dims must be static.

    With `mma` (tensor cores: sm_80 and later), an attention whose q, k and v are each the
    widening (arith.extf) of an f16 or bf16 tensor of one type, with head dims that are
    multiples of 16 (q, k) and 8 (v), takes the tensor-core form instead: the block's query
    tile and each key and value tile are staged in that half type (read from the half
    tensors in place, widened on load and rounded back: exact), and scf.foralls mapped to warps (#gpu.warp<x>, 16 query rows each) compute the
    warp's scores S = Q K^T and its P V as vector.contract ops of 16x8x16 tiles with f32
    accumulators (transfer_read/transfer_write on the block's buffers), which
    convert-vector-to-gpu turns into mma.sync on the GPU. Between them, the threads take
    the online-softmax step on the rows of S (the mods inlined) and write P, rounded to the
    half type, as FlashAttention-2 does.
  }];
  let options = [
    Option<"qTile", "q-tile", "int64_t", "64",
           "Query rows per block (threads per block); halved (down to 16) while the "
           "block's buffers exceed 48 KiB">,
    Option<"kvTile", "kv-tile", "int64_t", "32", "Keys per tile">,
    Option<"mma", "mma", "bool", "true",
           "Use the tensor-core (warp MMA) form for f16/bf16 attention">,
  ];
  let dependentDialects = ["::mlir::scf::SCFDialect", "::mlir::memref::MemRefDialect",
                           "::mlir::vector::VectorDialect",
                           "::mlir::gpu::GPUDialect", "::mlir::func::FuncDialect",
                           "::mlir::bufferization::BufferizationDialect",
                           "::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
                           "::mlir::tensor::TensorDialect"];
}

def TilesToCpuLoops : Pass<"qkv-tiles-to-cpu-loops", "::mlir::func::FuncOp"> {
  let summary = "Run the GPU-mapped scf.foralls on the CPU: blocks in parallel, threads in order";
  let description = [{
    An scf.forall mapped to GPU blocks becomes an scf.parallel (OpenMP tasks later); one
    mapped to GPU threads or warps becomes scf.for loops, which runs a block's threads
    (warps) one after the other, as the barriers between the GPU's foralls allow. A warp's
    body is warp-level code (whole-tile vector ops): it runs once per warp.
  }];
  let dependentDialects = ["::mlir::scf::SCFDialect"];
}

def MapTilesToGpu : Pass<"qkv-map-tiles-to-gpu", "::mlir::func::FuncOp"> {
  let summary = "Map the block and thread scf.foralls to a gpu.launch";
  let description = [{
    Each scf.forall mapped to GPU blocks becomes a gpu.launch with its trip counts as the
    grid and as many threads per block as the longest thread forall inside has
    iterations, or 32 per warp of the largest warp forall (static); the scf.foralls mapped
    to threads or warps inside it become thread-id (warp-id) code with a barrier after each (upstream's
    mapNestedForallToThreadsImpl); allocas marked `qkv.workgroup` become the launch's
    workgroup (shared memory) attributions.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect", "::mlir::scf::SCFDialect",
                           "::mlir::memref::MemRefDialect", "::mlir::arith::ArithDialect"];
}

def HostToDevice : Pass<"qkv-host-to-device", "::mlir::func::FuncOp"> {
  let summary = "Put the graph's buffers in device memory and its host loops on the device";
  let description = [{
    For the CUDA pipeline, after bufferization: buffers the function allocates become
    gpu.alloc/gpu.dealloc, a memref.copy becomes a parallel loop nest, and every loop
    nest left outside a gpu.launch and outside an scf.parallel (a reduction with no
    parallel dim) is wrapped in a one-iteration scf.parallel, so the loop mapping puts
    all of it on the device. The function's own arguments are device buffers too.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect", "::mlir::scf::SCFDialect",
                           "::mlir::memref::MemRefDialect", "::mlir::arith::ArithDialect"];
}

def WarpMmaToNvgpu : Pass<"qkv-warp-mma-to-nvgpu", "::mlir::gpu::GPUFuncOp"> {
  let summary = "The warp tile contractions of a kernel to mma.sync (nvgpu)";
  let description = [{
    MLIR's vector-to-nvgpu conversion (convertVectorToNVVMCompatibleMMASync, after its
    prepare patterns), applied to each run of consecutive warp tile ops (transfer_read,
    vector.contract, transfer_write, vector constants) that holds a contraction: in MLIR
    22 the upstream pass also takes scalar elementwise ops for fragment ops and fails on
    them. A bf16 kernel goes through the f16 path as bits: its bf16 workgroup buffers
    become f16 buffers of the same bits (stores and loads bitcast), the contractions read
    them as f16, and the function is marked `qkv.bf16_mma` for qkv-restore-bf16-mma
    (mma.sync m16n8k16 lays out f16 and bf16 fragments alike). A kernel mixing bf16 and
    other contractions is an error. Every workgroup buffer is also given a 16-byte alignment
    (`llvm.align`), which ldmatrix and vector loads need.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::vector::VectorDialect",
                           "::mlir::scf::SCFDialect", "::mlir::nvgpu::NVGPUDialect",
                           "::mlir::gpu::GPUDialect", "::mlir::affine::AffineDialect",
                           "::mlir::memref::MemRefDialect"];
}

def RestoreBf16Mma : Pass<"qkv-restore-bf16-mma", "::mlir::gpu::GPUFuncOp"> {
  let summary = "Make a marked kernel's f16 mma.sync ops bf16 again";
  let description = [{
    After convert-nvgpu-to-nvvm, in a gpu.func marked `qkv.bf16_mma` by
    qkv-warp-mma-to-nvgpu: every nvvm.mma.sync takes its A and B fragments as i32 (two bf16
    each) and multiplies bf16; the mark is removed. An mma.sync there whose fragments are
    not f16 pairs is an error.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect", "::mlir::NVVM::NVVMDialect"];
}

#endif // QKV_PASSES_TD
