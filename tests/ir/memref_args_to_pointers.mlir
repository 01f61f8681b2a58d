// qkv-memref-args-to-pointers (docs/compiler.md, "Whole models"): a private
// function called only directly takes its identity-layout memref arguments as an aligned
// pointer and their dynamic sizes; it rebuilds each descriptor, its callers pass the parts.
// RUN: qkv-opt %s --qkv-memref-args-to-pointers | FileCheck %s
// RUN: qkv-opt %s --qkv-memref-args-to-pointers --qkv-convert-to-llvm \
// RUN:   --reconcile-unrealized-casts | FileCheck %s --check-prefix=LLVM

// A layer: a static weight (the pointer alone), an activation with two dynamic sizes (the
// pointer and both), a strided view and an index (as they were, the view's attribute on it).
// CHECK-LABEL: func.func private @layer(
// CHECK-SAME: %[[W:[^:]*]]: !llvm.ptr, %[[X:[^:]*]]: !llvm.ptr, %[[B:[^:]*]]: i64,
// CHECK-SAME: %[[L:[^:]*]]: i64, %[[V:[^:]*]]: memref<?xf32, strided<[2]>> {test.kept}, %[[N:[^:]*]]: index)
// The activation's descriptor: the pointer twice, offset 0, sizes B, L, 8, strides L*8,
// 8, 1.
// CHECK: %[[XD0:.*]] = llvm.mlir.poison : !llvm.struct<(ptr, ptr, i64, array<3 x i64>, array<3 x i64>)>
// CHECK: %[[XD1:.*]] = llvm.insertvalue %[[X]], %[[XD0]][0]
// CHECK: %[[XD2:.*]] = llvm.insertvalue %[[X]], %[[XD1]][1]
// CHECK: %[[ZERO:.*]] = llvm.mlir.constant(0 : index) : i64
// CHECK: llvm.insertvalue %[[ZERO]], %[[XD2]][2]
// CHECK: %[[ONE:.*]] = llvm.mlir.constant(1 : i64) : i64
// CHECK: %[[EIGHT:.*]] = llvm.mlir.constant(8 : i64) : i64
// CHECK: llvm.insertvalue %[[EIGHT]], %{{.*}}[3, 2]
// CHECK: llvm.insertvalue %[[ONE]], %{{.*}}[4, 2]
// CHECK: %[[S1:.*]] = llvm.mul %[[ONE]], %[[EIGHT]]
// CHECK: llvm.insertvalue %[[L]], %{{.*}}[3, 1]
// CHECK: llvm.insertvalue %[[S1]], %{{.*}}[4, 1]
// CHECK: %[[S0:.*]] = llvm.mul %[[S1]], %[[L]]
// CHECK: llvm.insertvalue %[[B]], %{{.*}}[3, 0]
// CHECK: llvm.insertvalue %[[S0]], %{{.*}}[4, 0]
// CHECK: %[[XM:.*]] = builtin.unrealized_conversion_cast %{{.*}} : !llvm.struct<(ptr, ptr, i64, array<3 x i64>, array<3 x i64>)> to memref<?x?x8xf32>
// The weight's: sizes 4x8, no size argument.
// CHECK: llvm.insertvalue %[[W]], %{{.*}}[1]
// CHECK: %[[WM:.*]] = builtin.unrealized_conversion_cast %{{.*}} : !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)> to memref<4x8xf32>
// CHECK: memref.load %[[WM]]
// CHECK: memref.load %[[XM]]
// CHECK: memref.load %[[V]]
func.func private @layer(%w: memref<4x8xf32>, %x: memref<?x?x8xf32>,
                         %v: memref<?xf32, strided<[2]>> {test.kept}, %n: index) -> f32 {
  %c0 = arith.constant 0 : index
  %a = memref.load %w[%c0, %n] : memref<4x8xf32>
  %b = memref.load %x[%n, %n, %c0] : memref<?x?x8xf32>
  %c = memref.load %v[%n] : memref<?xf32, strided<[2]>>
  %s = arith.addf %a, %b : f32
  %t = arith.addf %s, %c : f32
  return %t : f32
}

// Each call passes the aligned pointers and the dynamic sizes.
// CHECK-LABEL: func.func @entry(
// CHECK-DAG: %[[WC:.*]] = builtin.unrealized_conversion_cast %arg0 : memref<4x8xf32> to !llvm.struct
// CHECK-DAG: %[[WP:.*]] = llvm.extractvalue %[[WC]][1]
// CHECK-DAG: %[[XC:.*]] = builtin.unrealized_conversion_cast %arg1 : memref<?x?x8xf32> to !llvm.struct
// CHECK-DAG: %[[XP:.*]] = llvm.extractvalue %[[XC]][1]
// CHECK-DAG: %[[XB:.*]] = llvm.extractvalue %[[XC]][3, 0]
// CHECK-DAG: %[[XL:.*]] = llvm.extractvalue %[[XC]][3, 1]
// CHECK: call @layer(%[[WP]], %[[XP]], %[[XB]], %[[XL]], %arg2, %arg3)
// CHECK: call @layer(
func.func @entry(%w: memref<4x8xf32>, %x: memref<?x?x8xf32>, %v: memref<?xf32, strided<[2]>>,
                 %n: index) -> f32 {
  %r = call @layer(%w, %x, %v, %n) : (memref<4x8xf32>, memref<?x?x8xf32>, memref<?xf32, strided<[2]>>, index) -> f32
  %r2 = call @layer(%w, %x, %v, %n) : (memref<4x8xf32>, memref<?x?x8xf32>, memref<?xf32, strided<[2]>>, index) -> f32
  %s = arith.addf %r, %r2 : f32
  return %s : f32
}

// Converted to the LLVM dialect, the layer takes 1 + 3 + 5 + 1 values (the strided view
// still a descriptor), and no cast is left.
// LLVM-LABEL: llvm.func @layer(
// LLVM-SAME: %arg0: !llvm.ptr, %arg1: !llvm.ptr, %arg2: i64, %arg3: i64, %arg4: !llvm.ptr,
// LLVM-SAME: %arg5: !llvm.ptr, %arg6: i64, %arg7: i64, %arg8: i64, %arg9: i64) -> f32
// LLVM-NOT: builtin.unrealized_conversion_cast

// Left alone: a public function, one whose address is taken, one that deallocates its
// argument.
// CHECK-LABEL: func.func @public_fn(%{{.*}}: memref<4xf32>)
func.func @public_fn(%w: memref<4xf32>) {
  return
}
// CHECK-LABEL: func.func private @taken(%{{.*}}: memref<4xf32>)
func.func private @taken(%w: memref<4xf32>) {
  return
}
// CHECK-LABEL: func.func private @freed(%{{.*}}: memref<4xf32>)
func.func private @freed(%w: memref<4xf32>) {
  memref.dealloc %w : memref<4xf32>
  return
}
func.func @users(%w: memref<4xf32>) -> ((memref<4xf32>) -> ()) {
  %f = func.constant @taken : (memref<4xf32>) -> ()
  call @taken(%w) : (memref<4xf32>) -> ()
  call @freed(%w) : (memref<4xf32>) -> ()
  call @public_fn(%w) : (memref<4xf32>) -> ()
  return %f : (memref<4xf32>) -> ()
}
