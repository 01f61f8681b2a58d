// qkv-lower-matmul-to-microkernels: linalg.matmul / batch_matmul on buffers become tasks
// (row blocks x panels of 4 vectors of columns) running the register-tiled micro-kernel;
// columns past the last whole panel go one masked vector at a time.
// RUN: qkv-opt %s --pass-pipeline="builtin.module(func.func(qkv-lower-matmul-to-microkernels{vector-bits=512}),canonicalize,cse)" | FileCheck %s

// N = 70: one panel of 64 columns, then 6 columns under a mask.
// CHECK-LABEL: func.func @matmul
// CHECK-SAME: %[[A:[a-z0-9]+]]: memref<?x8xf32>, %[[B:[a-z0-9]+]]: memref<8x70xf32>, %[[C:[a-z0-9]+]]: memref<?x70xf32>
// CHECK-NOT: linalg.matmul
// CHECK: %[[M:.*]] = memref.dim %[[C]], %c0
// row blocks of 48 (8 register tiles of 6 rows)
// CHECK: %[[M47:.*]] = arith.addi %[[M]], %c47
// CHECK: %[[BLOCKS:.*]] = arith.divui %[[M47]], %c48
// CHECK: scf.parallel (%[[BLK:.*]]) = (%c0) to (%[[BLOCKS]]) step (%c1)
// CHECK: %[[I0:.*]] = arith.muli %[[BLK]], %c48
// the C tile starts from C (linalg.matmul accumulates)
// CHECK: %[[ROW:.*]] = arith.addi %[[I0]], %{{.*}} : index
// CHECK: %[[C0:.*]] = vector.load %[[C]][%[[ROW]], %c0] : memref<?x70xf32>, vector<16xf32>
// a 6 x 4 register tile over K
// CHECK: %[[T:.*]]:24 = scf.for %[[K:.*]] = %c0 to %c8 step %c1 iter_args(%{{.*}} = %[[C0]],
// CHECK: %[[BV:.*]] = vector.load %[[B]][%[[K]], %c0] : memref<8x70xf32>, vector<16xf32>
// CHECK: %[[AX:.*]] = memref.load %[[A]][%[[ROW]], %[[K]]] : memref<?x8xf32>
// CHECK: %[[AB:.*]] = vector.broadcast %[[AX]] : f32 to vector<16xf32>
// CHECK: vector.fma %[[AB]], %[[BV]], %{{.*}} : vector<16xf32>
// CHECK: vector.store %[[T]]#0, %[[C]][%[[ROW]], %c0]
// the column tail: 6 of 16 lanes, 8 rows per register tile
// CHECK: scf.parallel
// CHECK: %[[MASK:.*]] = vector.constant_mask [6] : vector<16xi1>
// CHECK: vector.maskedload %[[C]][%{{.*}}, %c64], %[[MASK]]
// CHECK: scf.for {{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK: vector.maskedload %[[B]][%{{.*}}, %c64], %[[MASK]]
// CHECK: vector.maskedstore %[[C]][%{{.*}}, %c64], %[[MASK]]
func.func @matmul(%a: memref<?x8xf32>, %b: memref<8x70xf32>, %c: memref<?x70xf32>) {
  linalg.matmul ins(%a, %b : memref<?x8xf32>, memref<8x70xf32>) outs(%c : memref<?x70xf32>)
  return
}

// batch_matmul whose B serves every batch (a projection of (B, L, K) activations): tasks
// over (batch, row block); B is read without the batch index.
// CHECK-LABEL: func.func @shared_b
// CHECK-SAME: %[[A:[a-z0-9]+]]: memref<?x?x8xf32>, %[[B:[a-z0-9]+]]: memref<8x64xf32>, %[[C:[a-z0-9]+]]: memref<?x?x64xf32>
// CHECK: scf.parallel (%[[BATCH:.*]], %{{.*}}) = (%c0, %c0) to
// CHECK: vector.load %[[C]][%[[BATCH]], %{{.*}}, %c0] : memref<?x?x64xf32>
// CHECK: vector.load %[[B]][%{{.*}}, %c0] : memref<8x64xf32>
// CHECK: memref.load %[[A]][%[[BATCH]], %{{.*}}, %{{.*}}] : memref<?x?x8xf32>
func.func @shared_b(%a: memref<?x?x8xf32>, %b: memref<8x64xf32>, %c: memref<?x?x64xf32>) {
  linalg.batch_matmul indexing_maps = [affine_map<(d0,d1,d2,d3)->(d0,d1,d3)>, affine_map<(d0,d1,d2,d3)->(d3,d2)>, affine_map<(d0,d1,d2,d3)->(d0,d1,d2)>] ins(%a, %b : memref<?x?x8xf32>, memref<8x64xf32>) outs(%c : memref<?x?x64xf32>)
  return
}

// B's rows are not contiguous: left for convert-linalg-to-parallel-loops.
// CHECK-LABEL: func.func @strided
// CHECK: linalg.matmul
func.func @strided(%a: memref<?x8xf32>, %b: memref<8x64xf32, strided<[1, 8]>>, %c: memref<?x64xf32>) {
  linalg.matmul ins(%a, %b : memref<?x8xf32>, memref<8x64xf32, strided<[1, 8]>>) outs(%c : memref<?x64xf32>)
  return
}
