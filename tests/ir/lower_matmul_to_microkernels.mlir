// qkv-lower-matmul-to-microkernels: linalg.matmul / batch_matmul on buffers become tasks
// (row blocks x panels of 4 vectors of columns) calling the register-tiled micro-kernel,
// a private function of the module that every matmul shares; columns past the last whole
// panel go one masked vector at a time, through the masked form of the function.
// RUN: qkv-opt %s --pass-pipeline="builtin.module(qkv-lower-matmul-to-microkernels{vector-bits=512},canonicalize,cse)" | FileCheck %s

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
// CHECK: %[[ROWS:.*]] = arith.minsi %{{.*}}, %c48
// the operands as the function's 2-D views (unit-stride rows)
// CHECK: %[[AV:.*]] = memref.cast %[[A]] : memref<?x8xf32> to memref<?x?xf32, strided<[?, 1], offset: ?>>
// CHECK: %[[BV:.*]] = memref.cast %[[B]] : memref<8x70xf32> to memref<?x?xf32, strided<[?, 1], offset: ?>>
// CHECK: %[[CV:.*]] = memref.cast %[[C]] : memref<?x70xf32> to memref<?x?xf32, strided<[?, 1], offset: ?>>
// rows [i0, i0 + rows), columns from 0, K = 8; the tiles start from C (true: no fill
// before the matmul, which accumulates into C)
// CHECK: func.call @qkv_matmul_panel_f32_64(%[[AV]], %[[BV]], %[[CV]], %[[I0]], %[[ROWS]], %c0, %c8, %{{.*}}, %true)
// the column tail from 64, below N = 70
// CHECK: scf.parallel
// CHECK: func.call @qkv_matmul_panel_f32_16_masked(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c64, %c8, %{{.*}}, %true, %c70)
func.func @matmul(%a: memref<?x8xf32>, %b: memref<8x70xf32>, %c: memref<?x70xf32>) {
  linalg.matmul ins(%a, %b : memref<?x8xf32>, memref<8x70xf32>) outs(%c : memref<?x70xf32>)
  return
}

// batch_matmul whose B serves every batch (a projection of (B, L, K) activations): tasks
// over (batch, row block); A and C are the batch's 2-D subviews, B is passed whole. The
// same panel function serves it: one copy of the micro-kernel per module.
// CHECK-LABEL: func.func @shared_b
// CHECK-SAME: %[[A:[a-z0-9]+]]: memref<?x?x8xf32>, %[[B:[a-z0-9]+]]: memref<8x64xf32>, %[[C:[a-z0-9]+]]: memref<?x?x64xf32>
// CHECK: scf.parallel (%[[BATCH:.*]], %{{.*}}) = (%c0, %c0) to
// CHECK: %[[AS:.*]] = memref.subview %[[A]][%[[BATCH]], 0, 0] [1, %{{.*}}, 8] [1, 1, 1] : memref<?x?x8xf32> to memref<?x8xf32, strided<[8, 1], offset: ?>>
// CHECK: %[[AV:.*]] = memref.cast %[[AS]]
// CHECK: %[[BV:.*]] = memref.cast %[[B]] : memref<8x64xf32>
// CHECK: %[[CS:.*]] = memref.subview %[[C]][%[[BATCH]], 0, 0]
// CHECK: %[[CV:.*]] = memref.cast %[[CS]]
// CHECK: func.call @qkv_matmul_panel_f32_64(%[[AV]], %[[BV]], %[[CV]],
// N = 64: no column tail
// CHECK-NOT: scf.parallel
// CHECK: return
func.func @shared_b(%a: memref<?x?x8xf32>, %b: memref<8x64xf32>, %c: memref<?x?x64xf32>) {
  linalg.batch_matmul indexing_maps = [affine_map<(d0,d1,d2,d3)->(d0,d1,d3)>, affine_map<(d0,d1,d2,d3)->(d3,d2)>, affine_map<(d0,d1,d2,d3)->(d0,d1,d2)>] ins(%a, %b : memref<?x?x8xf32>, memref<8x64xf32>) outs(%c : memref<?x?x64xf32>)
  return
}

// C filled just before the matmul (what tensor.empty + linalg.fill bufferize to): the
// fill is folded into the micro-kernel, whose tiles start from its value (false: not
// from C), so C is written once.
// CHECK-LABEL: func.func @filled
// CHECK-SAME: %[[V:[a-z0-9]+]]: f32
// CHECK-NOT: linalg.fill
// CHECK: func.call @qkv_matmul_panel_f32_64(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c0, %c8, %[[V]], %false)
func.func @filled(%a: memref<?x8xf32>, %b: memref<8x64xf32>, %c: memref<?x64xf32>, %v: f32) {
  linalg.fill ins(%v : f32) outs(%c : memref<?x64xf32>)
  linalg.matmul ins(%a, %b : memref<?x8xf32>, memref<8x64xf32>) outs(%c : memref<?x64xf32>)
  return
}

// Ops free of memory effects between the fill and the matmul (a view of A, index math)
// do not stop the fold.
// CHECK-LABEL: func.func @filled_then_views
// CHECK-NOT: linalg.fill
// CHECK: func.call @qkv_matmul_panel_f32_64({{.*}}, %false)
func.func @filled_then_views(%a: memref<?x?x8xf32>, %b: memref<8x64xf32>, %c: memref<?x64xf32>, %v: f32) {
  linalg.fill ins(%v : f32) outs(%c : memref<?x64xf32>)
  %a2 = memref.collapse_shape %a [[0, 1], [2]] : memref<?x?x8xf32> into memref<?x8xf32>
  %c1 = arith.constant 1 : index
  linalg.matmul ins(%a2, %b : memref<?x8xf32>, memref<8x64xf32>) outs(%c : memref<?x64xf32>)
  return
}

// A write to memory between them does: the fill stays, the tiles start from C.
// CHECK-LABEL: func.func @filled_then_written
// CHECK: linalg.fill
// CHECK: memref.store
// CHECK: func.call @qkv_matmul_panel_f32_64({{.*}}, %true)
func.func @filled_then_written(%a: memref<?x8xf32>, %b: memref<8x64xf32>, %c: memref<?x64xf32>, %v: f32) {
  linalg.fill ins(%v : f32) outs(%c : memref<?x64xf32>)
  %c0 = arith.constant 0 : index
  memref.store %v, %c[%c0, %c0] : memref<?x64xf32>
  linalg.matmul ins(%a, %b : memref<?x8xf32>, memref<8x64xf32>) outs(%c : memref<?x64xf32>)
  return
}

// A fill of another buffer stays.
// CHECK-LABEL: func.func @filled_elsewhere
// CHECK: linalg.fill
// CHECK: func.call @qkv_matmul_panel_f32_64({{.*}}, %true)
func.func @filled_elsewhere(%a: memref<?x8xf32>, %b: memref<8x64xf32>, %c: memref<?x64xf32>, %d: memref<?x64xf32>, %v: f32) {
  linalg.fill ins(%v : f32) outs(%d : memref<?x64xf32>)
  linalg.matmul ins(%a, %b : memref<?x8xf32>, memref<8x64xf32>) outs(%c : memref<?x64xf32>)
  return
}

// A's rows are not contiguous (A read transposed): left for
// convert-linalg-to-parallel-loops too.
// CHECK-LABEL: func.func @strided_a
// CHECK: linalg.matmul
func.func @strided_a(%a: memref<?x8xf32, strided<[1, ?]>>, %b: memref<8x64xf32>, %c: memref<?x64xf32>) {
  linalg.matmul ins(%a, %b : memref<?x8xf32, strided<[1, ?]>>, memref<8x64xf32>) outs(%c : memref<?x64xf32>)
  return
}

// Nor B's.
// CHECK-LABEL: func.func @strided
// CHECK: linalg.matmul
func.func @strided(%a: memref<?x8xf32>, %b: memref<8x64xf32, strided<[1, 8]>>, %c: memref<?x64xf32>) {
  linalg.matmul ins(%a, %b : memref<?x8xf32>, memref<8x64xf32, strided<[1, 8]>>) outs(%c : memref<?x64xf32>)
  return
}

// The panel function, made once: a 6 x 4 register tile of C[i0 + i][n0 ..] runs over K
// in blocks of 128 keys, A broadcast, rows of B as vectors. The first block's tiles start
// from the fill value unless fromC, later ones from C; at least one block runs, so with
// K = 0 the fill is still written. Internal and kept out of line in LLVM.
// CHECK-LABEL: func.func private @qkv_matmul_panel_f32_64
// CHECK-SAME: (%[[A:[a-z0-9]+]]: memref<?x?xf32, strided<[?, 1], offset: ?>>, %[[B:[a-z0-9]+]]: memref<?x?xf32, strided<[?, 1], offset: ?>>, %[[C:[a-z0-9]+]]: memref<?x?xf32, strided<[?, 1], offset: ?>>, %[[I0:[a-z0-9]+]]: index, %[[M:[a-z0-9]+]]: index, %[[N0:[a-z0-9]+]]: index, %[[K:[a-z0-9]+]]: index, %[[FILL:[a-z0-9]+]]: f32, %[[FROMC:[a-z0-9]+]]: i1)
// CHECK-SAME: llvm.linkage = #llvm.linkage<internal>
// CHECK-SAME: passthrough = ["noinline"]
// CHECK: %[[FILLV:.*]] = vector.broadcast %[[FILL]] : f32 to vector<16xf32>
// CHECK: %[[NOTC:.*]] = arith.xori %[[FROMC]], %true
// CHECK: %[[KB:.*]] = arith.maxsi %[[K]], %c1
// CHECK: scf.for %[[K0:.*]] = %c0 to %[[KB]] step %c128
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[K0]], %c0
// CHECK: %[[FILLED:.*]] = arith.andi %[[NOTC]], %[[FIRST]]
// CHECK: %[[ROW:.*]] = arith.addi %[[I0]], %{{.*}} : index
// CHECK: %[[CL:.*]] = vector.load %[[C]][%[[ROW]], %[[N0]]]
// CHECK: %[[C0:.*]] = arith.select %[[FILLED]], %[[FILLV]], %[[CL]]
// CHECK: %[[T:.*]]:24 = scf.for %[[KK:.*]] = %c0 to %{{.*}} step %c1 iter_args(%{{.*}} = %[[C0]],
// CHECK: %[[KI:.*]] = arith.addi %[[K0]], %[[KK]]
// CHECK: %[[BR:.*]] = vector.load %[[B]][%[[KI]], %[[N0]]]
// CHECK: %[[AX:.*]] = memref.load %[[A]][%[[ROW]], %[[KI]]]
// CHECK: %[[AB:.*]] = vector.broadcast %[[AX]] : f32 to vector<16xf32>
// CHECK: vector.fma %[[AB]], %[[BR]], %{{.*}} : vector<16xf32>
// CHECK: vector.store %[[T]]#0, %[[C]][%[[ROW]], %[[N0]]]
// CHECK: return

// The masked form: one vector of columns, the lanes below n; 8 rows per register tile.
// CHECK-LABEL: func.func private @qkv_matmul_panel_f32_16_masked
// CHECK-SAME: %[[N0:arg5]]: index, %{{.*}}: index, %{{.*}}: f32, %{{.*}}: i1, %[[N:arg9]]: index)
// CHECK: %[[LEFT:.*]] = arith.subi %[[N]], %[[N0]]
// CHECK: %[[MASK:.*]] = vector.create_mask %[[LEFT]] : vector<16xi1>
// CHECK: vector.maskedload %{{.*}}, %[[MASK]]
// CHECK: scf.for {{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK: vector.maskedload %{{.*}}, %[[MASK]]
// CHECK: vector.maskedstore %{{.*}}, %[[MASK]]

