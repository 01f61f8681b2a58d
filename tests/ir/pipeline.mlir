// The CPU pipeline's stages as qkv-opt pipelines.
// RUN: qkv-opt %s --pass-pipeline="builtin.module(qkv-cpu-to-qkv,qkv-cpu-to-linalg,qkv-cpu-to-loops)" | FileCheck %s --check-prefix=LOOPS
// RUN: qkv-opt %s --pass-pipeline="builtin.module(qkv-cpu-to-qkv,qkv-cpu-to-linalg,qkv-cpu-to-loops)" | FileCheck %s --check-prefix=LOOPSONLY
// RUN: qkv-opt %s --qkv-cpu | FileCheck %s --check-prefix=LLVM
// RUN: qkv-opt %s --qkv-cpu | FileCheck %s --check-prefix=LLVMONLY
// RUN: qkv-opt %s --qkv-cpu --dump-pass-pipeline 2>&1 >/dev/null | FileCheck %s --check-prefix=PIPE

// loops: buffers instead of tensors, the result became an out-param, loops instead of
// linalg, and every allocation freed.
// LOOPS-LABEL: func.func @block(
// LOOPS-SAME: %[[X:arg[0-9]+]]: memref<?x8xf32>, %[[W:arg[0-9]+]]: memref<8x8xf32>, %[[OUT:arg[0-9]+]]: memref<?x8xf32>) attributes {llvm.emit_c_interface}
// LOOPS: scf.for
// LOOPS: memref.load %[[X]]
// LOOPS: memref.load %[[W]]
// LOOPS: math.sqrt
// LOOPS: memref.copy %{{.*}}, %[[OUT]]
// LOOPS: memref.dealloc
// LOOPS: return
// LOOPS-NEXT: }

// Nothing but loops and buffers from the label to the end of the module.
// LOOPSONLY-LABEL: func.func @block(
// LOOPSONLY-NOT: qkv.
// LOOPSONLY-NOT: linalg.
// LOOPSONLY-NOT: tensor.
// LOOPSONLY-NOT: tensor<
// LOOPSONLY-NOT: bufferization.

// llvm: only the LLVM dialect is left, with the C interface wrapper.
// LLVM-LABEL: llvm.func @block(
// LLVM: llvm.intr.exp
// LLVM: llvm.intr.sqrt
// LLVM: llvm.return
// LLVM-LABEL: llvm.func @_mlir_ciface_block(
// LLVM: llvm.call @block(
// LLVM: llvm.return

// Between the labels (the whole of @block) and from the wrapper's label to the end of
// the module, no op of another dialect.
// LLVMONLY-LABEL: llvm.func @block(
// LLVMONLY-NOT: {{(qkv|scf|cf|memref|linalg|tensor|arith|math|func|bufferization)\.}}
// LLVMONLY-LABEL: llvm.func @_mlir_ciface_block(
// LLVMONLY-NOT: {{(qkv|scf|cf|memref|linalg|tensor|arith|math|func|bufferization)\.}}

// PIPE: qkv-recognize-attention
// PIPE: qkv-lower-attention-to-loops
// PIPE: qkv-lower-to-linalg
// PIPE: one-shot-bufferize
// PIPE: buffer-results-to-out-params
// PIPE: convert-linalg-to-loops
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
