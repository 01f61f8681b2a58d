// qkv-host-to-device: a CUDA graph function's buffers become device buffers (gpu.alloc,
// gpu.dealloc), a memref.copy a parallel loop, and a loop nest left on the host (no
// parallel dim) a one-iteration scf.parallel, so the loop mapping makes it a kernel.
// Parallel loops are device code already and stay as they are.
// RUN: qkv-opt %s --pass-pipeline="builtin.module(func.func(qkv-host-to-device))" | FileCheck %s

// CHECK-LABEL: func.func @host
// CHECK: %[[BUF:.*]] = gpu.alloc (%{{.*}}) : memref<?xf32>
// CHECK-NOT: memref.alloc
// CHECK: scf.parallel (%{{.*}}) = (%{{.*}}) to (%{{.*}}) step
// CHECK: memref.load %{{.*}}[%{{.*}}] : memref<?xf32>
// CHECK: memref.store %{{.*}}, %[[BUF]]
// CHECK-NOT: memref.copy
// CHECK: scf.parallel (%{{.*}}) = (%c0{{.*}}) to (%c1{{.*}}) step (%c1{{.*}}) {
// CHECK-NEXT: scf.for
// CHECK: scf.parallel (%[[K:.*]]) =
// CHECK-NEXT: memref.load %[[BUF]][%[[K]]]
// CHECK: gpu.dealloc %[[BUF]] : memref<?xf32>
func.func @host(%in: memref<?xf32>, %out: memref<1xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %in, %c0 : memref<?xf32>
  %buf = memref.alloc(%n) : memref<?xf32>
  memref.copy %in, %buf : memref<?xf32> to memref<?xf32>
  scf.for %i = %c0 to %n step %c1 {
    %x = memref.load %buf[%i] : memref<?xf32>
    %acc = memref.load %out[%c0] : memref<1xf32>
    %s = arith.addf %acc, %x : f32
    memref.store %s, %out[%c0] : memref<1xf32>
  }
  scf.parallel (%k) = (%c0) to (%n) step (%c1) {
    %x = memref.load %buf[%k] : memref<?xf32>
    memref.store %x, %in[%k] : memref<?xf32>
  }
  memref.dealloc %buf : memref<?xf32>
  return
}
