// qkv-lower-matmul-to-microkernels without kc / mc: the blocks come from the cache sizes
// (docs/compiler.md, "The GEMM"). kc: a panel's kc x nr block of B in half of L1 or a
// sixteenth of L2, whichever is more, and at least 512 rows; mc: a task's packed rows of
// A (mc x kc) in half of L2, rounded down to whole tiles of 6 rows, at most 1024.
// 32 KiB L1, 1 MiB L2, 64-column f32 panels: L1 gives 64 rows, L2 256, so kc = 512 (the
// floor) and mc = 1 MiB / 2 / (512 * 4) = 256 -> 252 (the A block: 252 x 512 floats).
// RUN: qkv-opt %s --pass-pipeline="builtin.module(qkv-lower-matmul-to-microkernels{vector-bits=512 l1-bytes=32768 l2-bytes=1048576},canonicalize,cse)" | FileCheck %s --check-prefix=ONE
// 48 KiB L1, 4 MiB L2: L2 gives 1024 rows, more than the floor; mc = 4 MiB / 2 / 4096 = 512
// -> 510.
// RUN: qkv-opt %s --pass-pipeline="builtin.module(qkv-lower-matmul-to-microkernels{vector-bits=512 l1-bytes=49152 l2-bytes=4194304},canonicalize,cse)" | FileCheck %s --check-prefix=FOUR
// bf16 pairs on vdpbf16ps (2-byte packed elements) with 1 MiB of L2: L2 gives 512 rows.
// RUN: qkv-opt %s --pass-pipeline="builtin.module(qkv-lower-matmul-to-microkernels{vector-bits=512 l1-bytes=32768 l2-bytes=1048576 isa=avx512bf16},canonicalize,cse)" | FileCheck %s --check-prefix=DOT

// ONE-LABEL: func.func @matmul
// ONE: func.call @qkv_gemm_block_f32_6x64_k512(
// ONE-LABEL: func.func private @qkv_gemm_block_f32_6x64_k512(
// ONE: memref.alloc() {alignment = 64 : i64} : memref<129024xf32>
// ONE: scf.for %{{.*}} = %c0 to %{{.*}} step %c512

// FOUR-LABEL: func.func @matmul
// FOUR: func.call @qkv_gemm_block_f32_6x64_k1024(
// FOUR-LABEL: func.func private @qkv_gemm_block_f32_6x64_k1024(
// FOUR: memref.alloc() {alignment = 64 : i64} : memref<522240xf32>
// FOUR: scf.for %{{.*}} = %c0 to %{{.*}} step %c1024

// DOT-LABEL: func.func @matmul_bf16
// DOT: func.call @qkv_gemm_block_bf16_dot_6x64_k512(
func.func @matmul(%a: memref<?x4096xf32>, %b: memref<4096x256xf32>, %c: memref<?x256xf32>) {
  linalg.matmul ins(%a, %b : memref<?x4096xf32>, memref<4096x256xf32>) outs(%c : memref<?x256xf32>)
  return
}

func.func @matmul_bf16(%a: memref<?x4096xbf16>, %b: memref<4096x256xbf16>, %c: memref<?x256xf32>) {
  linalg.matmul ins(%a, %b : memref<?x4096xbf16>, memref<4096x256xbf16>) outs(%c : memref<?x256xf32>)
  return
}
