// qkv-linalg-to-loops (docs/compiler.md, "The CPU pipeline"): upstream's
// convert-linalg-to-parallel-loops where a function still holds a linalg op; a function
// without one is not looked at (the upstream pass's greedy driver would fold its ops).
// RUN: qkv-opt %s --pass-pipeline="builtin.module(func.func(qkv-linalg-to-loops))" | FileCheck %s

// A linalg op left: lowered to a parallel loop, and the rest of the function folded as
// the upstream pass does.
// CHECK-LABEL: func.func @left(
// CHECK-NOT: {{arith.addi|linalg\.}}
// CHECK: scf.parallel
// CHECK-NOT: {{arith.addi|linalg\.}}
// CHECK: return
func.func @left(%a: memref<?xf32>, %b: memref<?xf32>) -> index {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %s = arith.addi %c1, %c2 : index
  linalg.copy ins(%a : memref<?xf32>) outs(%b : memref<?xf32>)
  return %s : index
}

// No linalg op: the function is left as it is, its foldable add too.
// CHECK-LABEL: func.func @none(
// CHECK: arith.addi
// CHECK: return
func.func @none(%m: memref<?xf32>) -> index {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %s = arith.addi %c1, %c2 : index
  return %s : index
}
