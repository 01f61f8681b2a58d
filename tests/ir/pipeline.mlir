// The CPU pipeline's stages as qkv-opt pipelines.
// RUN: qkv-opt %s --pass-pipeline="builtin.module(qkv-cpu-to-qkv,qkv-cpu-to-linalg,qkv-cpu-to-loops)" | FileCheck %s --check-prefix=LOOPS
// RUN: qkv-opt %s --qkv-cpu | FileCheck %s --check-prefix=LLVM
// RUN: qkv-opt %s --qkv-cpu --dump-pass-pipeline 2>&1 >/dev/null | FileCheck %s --check-prefix=PIPE

// loops: buffers instead of tensors, the result became an out-param, loops instead of
// linalg, and every allocation freed.
// LOOPS-LABEL: func.func @block(
// LOOPS-SAME: %{{.*}}: memref<?x8xf32>, %{{.*}}: memref<8x8xf32>, %{{.*}}: memref<?x8xf32>) attributes {llvm.emit_c_interface}
// LOOPS-NOT: linalg.
// LOOPS-NOT: tensor<
// LOOPS: scf.for
// LOOPS: memref.dealloc
// LOOPS: return
// LOOPS-NOT: qkv.

// llvm: only the LLVM dialect is left, with the C interface wrapper.
// LLVM-NOT: qkv.
// LLVM-NOT: scf.
// LLVM-NOT: memref.
// LLVM: llvm.func @block(
// the attention's tasks run on OpenMP threads; its FMAs are vector FMAs
// LLVM: omp.parallel
// LLVM: omp.wsloop
// LLVM: llvm.intr.fmuladd({{.*}}) : (vector<16xf32>, vector<16xf32>, vector<16xf32>) -> vector<16xf32>
// LLVM: llvm.func @_mlir_ciface_block(

// PIPE: qkv-recognize-attention
// PIPE: qkv-lower-attention-to-flash
// PIPE: qkv-lower-to-linalg
// PIPE: one-shot-bufferize
// PIPE: buffer-results-to-out-params
// PIPE: convert-linalg-to-parallel-loops
// PIPE: convert-scf-to-openmp
// PIPE: convert-vector-to-llvm
// PIPE: finalize-memref-to-llvm
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
