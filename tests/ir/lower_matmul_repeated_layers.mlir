// qkv-lower-matmul-to-microkernels on repeated layers: a weight that a private function
// (a layer that the entry calls once per instance) reads is packed by the runtime like
// any param of the entry: the function takes it packed, after its other arguments, and
// each call passes the entry's packed argument for its own layer's weight.
// RUN: qkv-opt %s --pass-pipeline="builtin.module(qkv-lower-matmul-to-microkernels{vector-bits=256 kc=32 mc=12},canonicalize,cse)" | FileCheck %s

// CHECK-LABEL: func.func private @layer(
// CHECK-SAME: %[[WP:arg3]]: memref<?xf32> {qkv.packed_param = 1 : i64, qkv.panel_columns = 16 : i64, qkv.panel_rows = 1 : i64, qkv.row_multiple = 1 : i64})
// CHECK-NOT: qkv_gemm_pack_b
// CHECK: memref.subview %[[WP]][0] [640] [1]
// CHECK: return
func.func private @layer(%x: memref<?x8xf32>, %w: memref<8x70xf32>, %y: memref<?x70xf32>) {
  linalg.matmul ins(%x, %w : memref<?x8xf32>, memref<8x70xf32>) outs(%y : memref<?x70xf32>)
  return
}

// A function that one call passes something other than a param packs B per call.
// CHECK-LABEL: func.func private @mixed(
// CHECK-SAME: %{{.*}}: memref<?x70xf32>)
// CHECK: call @qkv_gemm_pack_b_f32_16(
func.func private @mixed(%x: memref<?x8xf32>, %w: memref<8x70xf32>, %y: memref<?x70xf32>) {
  linalg.matmul ins(%x, %w : memref<?x8xf32>, memref<8x70xf32>) outs(%y : memref<?x70xf32>)
  return
}

// CHECK-LABEL: func.func @model(
// CHECK-SAME: %[[W0P:arg4]]: memref<?xf32> {qkv.packed_param = 1 : i64, qkv.panel_columns = 16 : i64, qkv.panel_rows = 1 : i64, qkv.row_multiple = 1 : i64}, %[[W1P:arg5]]: memref<?xf32> {qkv.packed_param = 2 : i64, qkv.panel_columns = 16 : i64, qkv.panel_rows = 1 : i64, qkv.row_multiple = 1 : i64})
// CHECK: call @layer(%{{.*}}, %{{.*}}, %{{.*}}, %[[W0P]])
// CHECK: call @layer(%{{.*}}, %{{.*}}, %{{.*}}, %[[W1P]])
// CHECK: call @mixed(%{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}})
// CHECK: call @mixed(%{{[a-z0-9_]+}}, %{{[a-z0-9_]+}}, %{{[a-z0-9_]+}})
func.func @model(%x: memref<?x8xf32> {qkv.name = "x"}, %w0: memref<8x70xf32> {qkv.name = "w0", qkv.param}, %w1: memref<8x70xf32> {qkv.name = "w1", qkv.param}, %y: memref<?x70xf32>) attributes {llvm.emit_c_interface} {
  call @layer(%x, %w0, %y) : (memref<?x8xf32>, memref<8x70xf32>, memref<?x70xf32>) -> ()
  call @layer(%x, %w1, %y) : (memref<?x8xf32>, memref<8x70xf32>, memref<?x70xf32>) -> ()
  %scratch = memref.alloc() : memref<8x70xf32>
  call @mixed(%x, %w0, %y) : (memref<?x8xf32>, memref<8x70xf32>, memref<?x70xf32>) -> ()
  call @mixed(%x, %scratch, %y) : (memref<?x8xf32>, memref<8x70xf32>, memref<?x70xf32>) -> ()
  memref.dealloc %scratch : memref<8x70xf32>
  return
}

// Only the entry's packed params are listed for the runtime.
// CHECK: llvm.mlir.global external constant @qkv_packed_params("1:16:1:f32:1,2:16:1:f32:1\00")
