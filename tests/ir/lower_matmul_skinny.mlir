// qkv-lower-matmul-to-microkernels: which of the block and skinny functions a matmul gets
// from its row count. AVX2-sized: 6 x 16 register tiles, the skinny form for at most 6 rows.
// RUN: qkv-opt %s --split-input-file --pass-pipeline="builtin.module(qkv-lower-matmul-to-microkernels{vector-bits=256 kc=32 mc=12},canonicalize,cse)" | FileCheck %s

// Rows bound at run time: both, a task's rows choosing; the skinny function, which only a
// task of at most 6 rows takes, is a deferred function for LLVM (a JIT compile leaves it
// to the first call that takes it).
// CHECK-LABEL: func.func @dynamic_rows
// CHECK: scf.if
// CHECK: func.call @qkv_gemm_skinny_f32_6x16(
// CHECK: } else {
// CHECK: func.call @qkv_gemm_block_f32_6x16_k32(
// CHECK-DAG: func.func private @qkv_gemm_block_f32_6x16_k32({{.*}}) attributes {llvm.linkage = #llvm.linkage<internal>, passthrough = ["noinline"]}
// CHECK-DAG: func.func private @qkv_gemm_skinny_f32_6x16({{.*}}) attributes {llvm.linkage = #llvm.linkage<internal>, passthrough = ["noinline", "qkv-deferred"]}
func.func @dynamic_rows(%a: memref<?x8xf32>, %b: memref<8x70xf32>, %c: memref<?x70xf32>) {
  linalg.matmul ins(%a, %b : memref<?x8xf32>, memref<8x70xf32>) outs(%c : memref<?x70xf32>)
  return
}

// -----

// At most 6 rows, static (a decode step's of one sequence): the skinny form alone, called
// by every task; no block function, and the skinny one is not deferred.
// CHECK-LABEL: func.func @few_static_rows
// CHECK-NOT: scf.if
// CHECK: func.call @qkv_gemm_skinny_f32_6x16(
// CHECK-NOT: qkv_gemm_block
// CHECK: func.func private @qkv_gemm_skinny_f32_6x16({{.*}}) attributes {llvm.linkage = #llvm.linkage<internal>, passthrough = ["noinline"]}
// CHECK-NOT: qkv_gemm_block
func.func @few_static_rows(%a: memref<3x8xf32>, %b: memref<8x70xf32>, %c: memref<3x70xf32>) {
  linalg.matmul ins(%a, %b : memref<3x8xf32>, memref<8x70xf32>) outs(%c : memref<3x70xf32>)
  return
}

// -----

// More static rows than the skinny form takes: the block function alone.
// CHECK-LABEL: func.func @many_static_rows
// CHECK: func.call @qkv_gemm_block_f32_6x16_k32(
// CHECK-NOT: qkv_gemm_skinny
func.func @many_static_rows(%a: memref<40x8xf32>, %b: memref<8x70xf32>, %c: memref<40x70xf32>) {
  linalg.matmul ins(%a, %b : memref<40x8xf32>, memref<8x70xf32>) outs(%c : memref<40x70xf32>)
  return
}

// -----

// A static matmul of few rows and a dynamic one share the skinny function: the static one
// takes it for certain, so it is compiled with the kernel.
// CHECK-LABEL: func.func @shared_skinny
// CHECK: func.func private @qkv_gemm_skinny_f32_6x16({{.*}}) attributes {llvm.linkage = #llvm.linkage<internal>, passthrough = ["noinline"]}
func.func @shared_skinny(%a: memref<?x8xf32>, %a3: memref<3x8xf32>, %b: memref<8x70xf32>, %c: memref<?x70xf32>, %c3: memref<3x70xf32>) {
  linalg.matmul ins(%a, %b : memref<?x8xf32>, memref<8x70xf32>) outs(%c : memref<?x70xf32>)
  linalg.matmul ins(%a3, %b : memref<3x8xf32>, memref<8x70xf32>) outs(%c3 : memref<3x70xf32>)
  return
}
