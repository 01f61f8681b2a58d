// qkv-deallocate-buffers: every memref.alloc in its function's entry block, nothing made
// from it leaving the function: one memref.dealloc each before the return, and nothing
// else changes (the upstream pipeline would also canonicalize, folding the subview's
// %c0). Any other module gets buffer-deallocation-pipeline.
// RUN: qkv-opt %s --split-input-file --qkv-deallocate-buffers | FileCheck %s

// A view passed to a call that returns nothing does not escape.
// CHECK-LABEL: func.func @simple
// CHECK: %[[A:.*]] = memref.alloc(%{{.*}}) : memref<?xf32>
// CHECK: %[[B:.*]] = memref.alloc(%{{.*}}) : memref<?xf32>
// CHECK: memref.subview %[[A]][%c0]
// CHECK: call @use(
// CHECK: memref.copy %[[B]], %{{.*}}
// CHECK-NEXT: memref.dealloc %[[A]] : memref<?xf32>
// CHECK-NEXT: memref.dealloc %[[B]] : memref<?xf32>
// CHECK-NEXT: return
func.func private @use(memref<?xf32, strided<[1], offset: ?>>)

func.func @simple(%n: index, %out: memref<?xf32>) {
  %a = memref.alloc(%n) : memref<?xf32>
  %b = memref.alloc(%n) : memref<?xf32>
  %c0 = arith.constant 0 : index
  %v = memref.subview %a[%c0] [%n] [1] : memref<?xf32> to memref<?xf32, strided<[1], offset: ?>>
  func.call @use(%v) : (memref<?xf32, strided<[1], offset: ?>>) -> ()
  memref.copy %a, %b : memref<?xf32> to memref<?xf32>
  memref.copy %b, %out : memref<?xf32> to memref<?xf32>
  return
}

// -----

// An allocation inside a loop: the upstream pipeline frees it in the loop body.
// CHECK-LABEL: func.func @in_loop
// CHECK: scf.for
// CHECK: %[[A:.*]] = memref.alloc
// CHECK: memref.copy %[[A]]
// CHECK-NEXT: memref.dealloc %[[A]]
// CHECK-NEXT: }
// CHECK-NEXT: return
func.func @in_loop(%n: index, %out: memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    %a = memref.alloc(%n) : memref<?xf32>
    memref.copy %a, %out : memref<?xf32> to memref<?xf32>
  }
  return
}

// -----

// A cast of the buffer is returned: the upstream pipeline, which does not free it.
// CHECK-LABEL: func.func @returned
// CHECK: %[[A:.*]] = memref.alloc
// CHECK-NOT: memref.dealloc
// CHECK: %[[C:.*]] = memref.cast %[[A]]
// CHECK-NOT: memref.dealloc
// CHECK: return %[[C]]
func.func @returned(%n: index) -> memref<?xf32, strided<[1], offset: ?>> {
  %a = memref.alloc(%n) : memref<?xf32>
  %c = memref.cast %a : memref<?xf32> to memref<?xf32, strided<[1], offset: ?>>
  return %c : memref<?xf32, strided<[1], offset: ?>>
}
