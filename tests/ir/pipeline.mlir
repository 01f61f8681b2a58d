// The CPU pipeline's stages as qkv-opt pipelines.
// RUN: qkv-opt %s --pass-pipeline="builtin.module(qkv-cpu-to-qkv,qkv-cpu-to-linalg,qkv-cpu-to-loops)" | FileCheck %s --check-prefix=LOOPS
// RUN: qkv-opt %s --pass-pipeline="builtin.module(qkv-cpu-to-qkv,qkv-cpu-to-linalg,qkv-cpu-to-loops)" | FileCheck %s --check-prefix=LOOPSONLY
// RUN: qkv-opt %s --qkv-cpu | FileCheck %s --check-prefix=LLVM
// RUN: qkv-opt %s --qkv-cpu | FileCheck %s --check-prefix=LLVMONLY
// RUN: qkv-opt %s --qkv-cpu --dump-pass-pipeline 2>&1 >/dev/null | FileCheck %s --check-prefix=PIPE

// loops: buffers instead of tensors, the result became an out-param written in place (no
// copy into it at the end), loops and vector code instead of linalg, every allocation
// freed.
// LOOPS-LABEL: func.func @block(
// LOOPS-SAME: %[[X:arg[0-9]+]]: memref<?x8xf32>, %[[W:arg[0-9]+]]: memref<8x8xf32>, %[[OUT:arg[0-9]+]]: memref<?x8xf32>) attributes {llvm.emit_c_interface}
// the projection: w packed into panels (w is not a param here: a scratch buffer, per
// call), then parallel tasks calling the GEMM's block function on x
// LOOPS: memref.cast %[[W]]
// LOOPS: call @qkv_gemm_pack_b_f32_64(
// LOOPS: scf.parallel
// LOOPS: memref.cast %[[X]]
// LOOPS: func.call @qkv_gemm_block_f32_6x64_k{{[0-9]+}}(
// the attention kernel, then rms_norm
// LOOPS: scf.parallel
// LOOPS: math.sqrt
// LOOPS-NOT: memref.copy
// LOOPS: memref.dealloc
// LOOPS: return
// LOOPS-NEXT: }
// rope writes each half of its result straight into the out-param (eliminate-empty-tensors:
// the halves' generics take slices of the destination), no buffer copied into it
// LOOPS-LABEL: func.func @rope_qk(
// LOOPS: math.cos
// LOOPS-NOT: math.cos
// LOOPS-NOT: memref.copy
// LOOPS: return
// the packing (w's 8 columns under a mask) and the block function: packed x broadcast,
// packed w as vectors
// LOOPS-LABEL: func.func private @qkv_gemm_pack_b_f32_64(
// LOOPS: vector.maskedload
// LOOPS-LABEL: func.func private @qkv_gemm_block_f32_6x64_k{{[0-9]+}}(
// LOOPS: memref.load
// LOOPS: vector.broadcast
// LOOPS: vector.fma

// Nothing but loops and buffers from the label to the end of the module.
// LOOPSONLY-LABEL: func.func @block(
// LOOPSONLY-NOT: qkv.
// LOOPSONLY-NOT: linalg.
// LOOPSONLY-NOT: tensor.
// LOOPSONLY-NOT: tensor<
// LOOPSONLY-NOT: bufferization.

// llvm: only the LLVM dialect is left, with the C interface wrapper.
// LLVM-LABEL: llvm.func @block(
// the attention's tasks run on OpenMP threads; its FMAs are vector FMAs
// LLVM: omp.parallel
// LLVM: omp.wsloop
// LLVM: llvm.intr.fmuladd({{.*}}) : (vector<16xf32>, vector<16xf32>, vector<16xf32>) -> vector<16xf32>
// rms_norm's loops (8 columns a row) fork only when there are rows enough
// (qkv-serialize-small-parallel)
// LLVM: omp.parallel if(
// LLVM: llvm.intr.sqrt
// LLVM: llvm.return
// LLVM-LABEL: llvm.func @_mlir_ciface_block(
// LLVM: llvm.call @block(
// LLVM: llvm.return

// Between the labels (the whole of @block) and from the wrapper's label to the end of
// the module, no op of another dialect (OpenMP's stay until translation to LLVM IR).
// LLVMONLY-LABEL: llvm.func @block(
// LLVMONLY-NOT: {{[ "](qkv|scf|cf|memref|linalg|tensor|arith|math|func|bufferization|vector)\.}}
// LLVMONLY-LABEL: llvm.func @_mlir_ciface_block(
// LLVMONLY-NOT: {{[ "](qkv|scf|cf|memref|linalg|tensor|arith|math|func|bufferization|vector)\.}}

// PIPE: qkv-recognize-attention
// PIPE: qkv-lower-attention-to-flash
// PIPE: qkv-lower-to-linalg
// PIPE: qkv-group-sibling-matmuls
// PIPE: qkv-copy-repeated-results
// PIPE: qkv-unshare-fills
// PIPE: eliminate-empty-tensors
// PIPE: one-shot-bufferize
// PIPE: buffer-results-to-out-params
// PIPE: qkv-lower-matmul-to-microkernels
// PIPE: qkv-vectorize-elementwise
// PIPE: qkv-linalg-to-loops
// PIPE: qkv-memref-args-to-pointers
// PIPE: qkv-lower-checks
// PIPE: convert-scf-to-openmp
// PIPE: qkv-serialize-small-parallel
// PIPE: qkv-lower-vector-and-views
// PIPE-NOT: convert-vector-to-llvm
// PIPE-NOT: expand-strided-metadata
// PIPE: finalize-memref-to-llvm
// PIPE-NOT: convert-openmp-to-llvm
// PIPE: convert-math-to-llvm
// PIPE: qkv-math-to-libm
// the rest in one conversion, not one pass per dialect
// PIPE-NOT: convert-arith-to-llvm
// PIPE: qkv-convert-to-llvm
// PIPE: reconcile-unrealized-casts

func.func @block(%x: tensor<?x8xf32>, %w: tensor<8x8xf32>) -> tensor<?x8xf32> attributes {llvm.emit_c_interface} {
  %q = qkv.linear %x, %w : tensor<?x8xf32>, tensor<8x8xf32> -> tensor<?x8xf32>
  %a = qkv.attention %q, %q, %q : tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32> -> tensor<?x8xf32>
    mask {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index):
      %c = arith.cmpi sge, %qi, %ki : index
      qkv.yield %c : i1
    }
  %n = qkv.rms_norm %a eps 0.000001 : tensor<?x8xf32> -> tensor<?x8xf32>
  return %n : tensor<?x8xf32>
}

func.func @rope_qk(%q: tensor<2x?x8xf32>, %k: tensor<2x?x8xf32>, %pos: tensor<2x?xi64>) -> (tensor<2x?x8xf32>, tensor<2x?x8xf32>) attributes {llvm.emit_c_interface} {
  %0 = qkv.rope %q positions %pos : tensor<2x?xi64> base 10000.0 offset 0 : tensor<2x?x8xf32> -> tensor<2x?x8xf32>
  %1 = qkv.rope %k positions %pos : tensor<2x?xi64> base 10000.0 offset 0 : tensor<2x?x8xf32> -> tensor<2x?x8xf32>
  return %0, %1 : tensor<2x?x8xf32>, tensor<2x?x8xf32>
}
