// qkv-lower-matmul-to-microkernels: linalg.matmul / batch_matmul on buffers become the
// blocked, packed GEMM: B packed into panels of nr columns (a scratch buffer, tasks over
// panels; or, for a 2-D param, an argument the runtime packs once), then tasks over (batch,
// row block, range of panels) calling the block function, a private function of the
// module that every matmul shares. AVX2-sized here: 8 lanes, 6 x 2-vector register tiles
// (nr = 16), K blocks of 32, row blocks of at most 12.
// RUN: qkv-opt %s --pass-pipeline="builtin.module(qkv-lower-matmul-to-microkernels{vector-bits=256 kc=32 mc=12},canonicalize,cse)" | FileCheck %s

// N = 70: 5 panels of 16 columns, the last holding 6.
// CHECK-LABEL: func.func @matmul
// CHECK-SAME: %[[A:[a-z0-9]+]]: memref<?x8xf32>, %[[B:[a-z0-9]+]]: memref<8x70xf32>, %[[C:[a-z0-9]+]]: memref<?x70xf32>)
// CHECK-NOT: linalg.matmul
// CHECK: %[[M:.*]] = memref.dim %[[C]], %c0
// B packed: 5 panels x K = 8 rows x 16 columns, one task per panel
// CHECK: %[[BP:.*]] = memref.alloc() {alignment = 64 : i64} : memref<640xf32>
// CHECK: scf.parallel (%[[P:.*]]) = (%c0) to (%c5) step (%c1)
// CHECK: %[[BV:.*]] = memref.cast %[[B]] : memref<8x70xf32> to memref<?x?xf32, strided<[?, 1], offset: ?>>
// CHECK: %[[BPV:.*]] = memref.cast %[[BP]] : memref<640xf32> to memref<?xf32, strided<[1], offset: ?>>
// CHECK: %[[P1:.*]] = arith.addi %[[P]], %c1
// CHECK: func.call @qkv_gemm_pack_b_f32_16(%[[BV]], %[[BPV]], %[[P]], %[[P1]], %c70, %c8)
// row blocks: at least ceil(M / 12) of them, rounded up to a multiple of the threads,
// of equal size in whole tiles of 6 rows
// CHECK: %[[T:.*]] = call @omp_get_max_threads()
// CHECK: %[[TI:.*]] = arith.index_cast %[[T]]
// CHECK: %[[T1:.*]] = arith.maxsi %[[TI]], %c1
// CHECK: %[[M11:.*]] = arith.addi %[[M]], %c11
// CHECK: %[[LEAST:.*]] = arith.divui %[[M11]], %c12
// column ranges: one when the blocks divide among the threads, else one per thread
// CHECK: %[[REM:.*]] = arith.remui %[[BLOCKS:.*]], %[[T1]]
// CHECK: %[[DIV:.*]] = arith.cmpi eq, %[[REM]], %c0
// CHECK: arith.select %[[DIV]], %c1, %[[TI]]
// CHECK: scf.parallel (%[[BLK:.*]], %[[RANGE:.*]]) = (%c0, %c0) to (%[[BLOCKS]], %{{.*}}) step (%c1, %c1)
// CHECK: %[[I0:.*]] = arith.muli %[[BLK]], %[[MC:.*]] : index
// CHECK: %[[ROWS:.*]] = arith.minsi %[[MC]], %{{.*}}
// CHECK: %[[AV:.*]] = memref.cast %[[A]] : memref<?x8xf32> to memref<?x?xf32, strided<[?, 1], offset: ?>>
// CHECK: %[[CV:.*]] = memref.cast %[[C]] : memref<?x70xf32> to memref<?x?xf32, strided<[?, 1], offset: ?>>
// a task of at most 6 rows (a decode step's) calls the skinny form, others the block
// function; the tiles start from C (true: no fill before the matmul, which accumulates
// into C)
// CHECK: %[[SKINNY:.*]] = arith.cmpi sle, %[[ROWS]], %c6
// CHECK: scf.if %[[SKINNY]]
// CHECK: func.call @qkv_gemm_skinny_f32_6x16(%[[AV]], %{{.*}}, %[[CV]], %[[I0]], %[[ROWS]], %{{.*}}, %{{.*}}, %c70, %c8, %{{.*}}, %true)
// CHECK: } else {
// CHECK: func.call @qkv_gemm_block_f32_6x16_k32(%[[AV]], %{{.*}}, %[[CV]], %[[I0]], %[[ROWS]], %{{.*}}, %{{.*}}, %c70, %c8, %{{.*}}, %true)
// the scratch buffer is freed after the matmul
// CHECK: memref.dealloc %[[BP]]
func.func @matmul(%a: memref<?x8xf32>, %b: memref<8x70xf32>, %c: memref<?x70xf32>) {
  linalg.matmul ins(%a, %b : memref<?x8xf32>, memref<8x70xf32>) outs(%c : memref<?x70xf32>)
  return
}

// B a param of the entry function (a weight): nothing is packed per call. The function
// takes it packed, as an argument after all others that names the param it packs and
// its panel width; a param that two matmuls read is packed once.
// CHECK-LABEL: func.func @params
// CHECK-SAME: %[[CP:arg3]]: memref<?x70xf32>, %[[WP:arg4]]: memref<?xf32> {qkv.packed_param = 1 : i64, qkv.panel_columns = 16 : i64, qkv.panel_rows = 1 : i64, qkv.row_multiple = 1 : i64}, %[[W2P:arg5]]: memref<?xf32> {qkv.packed_param = 2 : i64, qkv.panel_columns = 16 : i64, qkv.panel_rows = 1 : i64, qkv.row_multiple = 1 : i64})
// CHECK-NOT: memref.alloc
// CHECK-NOT: qkv_gemm_pack_b
// CHECK: memref.subview %[[WP]][0] [640] [1]
// CHECK: func.call @qkv_gemm_block_f32_6x16_k32(
// CHECK: memref.subview %[[W2P]][0] [640] [1]
// CHECK: func.call @qkv_gemm_block_f32_6x16_k32(
// CHECK: memref.subview %[[WP]][0] [640] [1]
// CHECK: func.call @qkv_gemm_block_f32_6x16_k32(
// CHECK-NOT: memref.dealloc
// CHECK: return
func.func @params(%a: memref<?x8xf32> {qkv.name = "x"}, %b: memref<8x70xf32> {qkv.name = "w", qkv.param}, %b2: memref<8x70xf32> {qkv.name = "w2", qkv.param}, %c: memref<?x70xf32>) attributes {llvm.emit_c_interface} {
  linalg.matmul ins(%a, %b : memref<?x8xf32>, memref<8x70xf32>) outs(%c : memref<?x70xf32>)
  linalg.matmul ins(%a, %b2 : memref<?x8xf32>, memref<8x70xf32>) outs(%c : memref<?x70xf32>)
  linalg.matmul ins(%a, %b : memref<?x8xf32>, memref<8x70xf32>) outs(%c : memref<?x70xf32>)
  return
}

// batch_matmul whose B serves every batch (a projection of (B, L, K) activations), A and
// C dense: one matmul over the rows of all batches (a block of rows may span batches).
// CHECK-LABEL: func.func @shared_b
// CHECK-SAME: %[[A:[a-z0-9]+]]: memref<?x?x8xf32>, %[[B:[a-z0-9]+]]: memref<8x64xf32>, %[[C:[a-z0-9]+]]: memref<?x?x64xf32>
// CHECK: %[[A2:.*]] = memref.collapse_shape %[[A]] {{\[}}[0, 1], [2]] : memref<?x?x8xf32> into memref<?x8xf32>
// CHECK: %[[C2:.*]] = memref.collapse_shape %[[C]] {{\[}}[0, 1], [2]] : memref<?x?x64xf32> into memref<?x64xf32>
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<512xf32>
// CHECK: func.call @qkv_gemm_pack_b_f32_16(
// CHECK: scf.parallel (%{{.*}}, %{{.*}}) = (%c0, %c0) to
// CHECK: %[[AV:.*]] = memref.cast %[[A2]]
// CHECK: %[[CV:.*]] = memref.cast %[[C2]]
// CHECK: func.call @qkv_gemm_block_f32_6x16_k32(%[[AV]], %{{.*}}, %[[CV]],
func.func @shared_b(%a: memref<?x?x8xf32>, %b: memref<8x64xf32>, %c: memref<?x?x64xf32>) {
  linalg.batch_matmul indexing_maps = [affine_map<(d0,d1,d2,d3)->(d0,d1,d3)>, affine_map<(d0,d1,d2,d3)->(d3,d2)>, affine_map<(d0,d1,d2,d3)->(d0,d1,d2)>] ins(%a, %b : memref<?x?x8xf32>, memref<8x64xf32>) outs(%c : memref<?x?x64xf32>)
  return
}

// The same with A a strided view (not dense across batches): tasks over (batch, row
// block, range of panels), A and C the batch's 2-D subviews.
// CHECK-LABEL: func.func @shared_b_strided
// CHECK-SAME: %[[A:[a-z0-9]+]]: memref<?x?x8xf32, strided<[?, 16, 1]>>
// CHECK: scf.parallel (%[[BATCH:.*]], %{{.*}}, %{{.*}}) = (%c0, %c0, %c0) to
// CHECK: %[[AS:.*]] = memref.subview %[[A]][%[[BATCH]], 0, 0] [1, %{{.*}}, 8] [1, 1, 1]
// CHECK: %[[AV:.*]] = memref.cast %[[AS]]
// CHECK: %[[CS:.*]] = memref.subview %{{.*}}[%[[BATCH]], 0, 0]
// CHECK: %[[CV:.*]] = memref.cast %[[CS]]
// CHECK: func.call @qkv_gemm_block_f32_6x16_k32(%[[AV]], %{{.*}}, %[[CV]],
func.func @shared_b_strided(%a: memref<?x?x8xf32, strided<[?, 16, 1]>>, %b: memref<8x64xf32>, %c: memref<?x?x64xf32>) {
  linalg.batch_matmul indexing_maps = [affine_map<(d0,d1,d2,d3)->(d0,d1,d3)>, affine_map<(d0,d1,d2,d3)->(d3,d2)>, affine_map<(d0,d1,d2,d3)->(d0,d1,d2)>] ins(%a, %b : memref<?x?x8xf32, strided<[?, 16, 1]>>, memref<8x64xf32>) outs(%c : memref<?x?x64xf32>)
  return
}

// A B for each batch: packed for each (tasks over batch and panel), each batch's tasks
// reading its own part.
// CHECK-LABEL: func.func @batched_b
// CHECK: scf.parallel (%[[BB:.*]], %[[PB:.*]]) = (%c0, %c0) to (%{{.*}}, %c4)
// CHECK: memref.subview %{{.*}}[%[[BB]], 0, 0]
// CHECK: %[[OFF:.*]] = arith.muli %[[BB]], %c512
// CHECK: memref.subview %{{.*}}[%[[OFF]]] [512] [1]
// CHECK: func.call @qkv_gemm_pack_b_f32_16(
func.func @batched_b(%a: memref<?x?x8xf32>, %b: memref<?x8x64xf32>, %c: memref<?x?x64xf32>) {
  linalg.batch_matmul ins(%a, %b : memref<?x?x8xf32>, memref<?x8x64xf32>) outs(%c : memref<?x?x64xf32>)
  return
}

// C filled just before the matmul (what tensor.empty + linalg.fill bufferize to): the
// fill is folded into the GEMM, whose tiles start from its value (false: not from C),
// so C is written once.
// CHECK-LABEL: func.func @filled
// CHECK-SAME: %[[V:[a-z0-9]+]]: f32
// CHECK-NOT: linalg.fill
// CHECK: func.call @qkv_gemm_block_f32_6x16_k32(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %c64, %c8, %[[V]], %false)
func.func @filled(%a: memref<?x8xf32>, %b: memref<8x64xf32>, %c: memref<?x64xf32>, %v: f32) {
  linalg.fill ins(%v : f32) outs(%c : memref<?x64xf32>)
  linalg.matmul ins(%a, %b : memref<?x8xf32>, memref<8x64xf32>) outs(%c : memref<?x64xf32>)
  return
}

// Ops free of memory effects between the fill and the matmul (a view of A, index math)
// do not stop the fold.
// CHECK-LABEL: func.func @filled_then_views
// CHECK-NOT: linalg.fill
// CHECK: func.call @qkv_gemm_block_f32_6x16_k32({{.*}}, %false)
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
// CHECK: func.call @qkv_gemm_block_f32_6x16_k32({{.*}}, %true)
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
// CHECK: func.call @qkv_gemm_block_f32_6x16_k32({{.*}}, %true)
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

// The packing function: panels [p0, p1) of B, each K rows of nr columns one after the
// other; the last panel's columns past N come from masked loads, as zeros.
// CHECK-LABEL: func.func private @qkv_gemm_pack_b_f32_16
// CHECK-SAME: (%[[B:[a-z0-9]+]]: memref<?x?xf32, strided<[?, 1], offset: ?>>, %[[BP:[a-z0-9]+]]: memref<?xf32, strided<[1], offset: ?>>, %[[P0:[a-z0-9]+]]: index, %[[P1:[a-z0-9]+]]: index, %[[N:[a-z0-9]+]]: index, %[[K:[a-z0-9]+]]: index)
// CHECK-SAME: llvm.linkage = #llvm.linkage<internal>
// CHECK: scf.for %[[P:.*]] = %[[P0]] to %[[P1]] step %c1
// CHECK: %[[J0:.*]] = arith.muli %[[P]], %c16
// CHECK: %[[COLS:.*]] = arith.subi %[[N]], %[[J0]]
// CHECK: %[[PK:.*]] = arith.muli %[[P]], %[[K]]
// CHECK: %[[BASE:.*]] = arith.muli %[[PK]], %c16
// CHECK: %[[WHOLE:.*]] = arith.cmpi sge, %[[COLS]], %c16
// CHECK: scf.if %[[WHOLE]]
// CHECK: scf.for %[[KK:.*]] = %c0 to %[[K]] step %c1
// CHECK: %[[ROW:.*]] = arith.muli %[[KK]], %c16
// CHECK: %[[TO:.*]] = arith.addi %[[BASE]], %[[ROW]]
// CHECK: %[[V:.*]] = vector.load %[[B]][%[[KK]], %[[J0]]]
// CHECK: vector.store %[[V]], %[[BP]][%[[TO]]]
// CHECK: } else {
// CHECK: %[[MASK:.*]] = vector.create_mask %[[COLS]] : vector<8xi1>
// CHECK: vector.maskedload %[[B]][%{{.*}}, %[[J0]]], %[[MASK]]

// The block function, made once: for each K block of 32 rows, A's rows of the task are
// packed (row after row, kc apart), then every
// 6 x 16 register tile of every panel runs over the block: packed B as vectors, packed A
// broadcast. The first block's tiles start from the fill unless fromC and store without
// reading C; later ones start from zero and add C, prefetched at the tile's start and
// loaded after the K loop (no FMA waits on it). Tiles whose rows or
// columns leave C read and write under masks. At least one K block runs, so with K = 0
// the fill is still written. Internal and kept out of line in LLVM.
// CHECK-LABEL: func.func private @qkv_gemm_block_f32_6x16_k32
// CHECK-SAME: (%[[A:[a-z0-9]+]]: memref<?x?xf32, strided<[?, 1], offset: ?>>, %[[BP:[a-z0-9]+]]: memref<?xf32, strided<[1], offset: ?>>, %[[C:[a-z0-9]+]]: memref<?x?xf32, strided<[?, 1], offset: ?>>, %[[I0:[a-z0-9]+]]: index, %[[M:[a-z0-9]+]]: index, %[[P0:[a-z0-9]+]]: index, %[[P1:[a-z0-9]+]]: index, %[[N:[a-z0-9]+]]: index, %[[K:[a-z0-9]+]]: index, %[[FILL:[a-z0-9]+]]: f32, %[[FROMC:[a-z0-9]+]]: i1)
// CHECK-SAME: llvm.linkage = #llvm.linkage<internal>
// CHECK-SAME: passthrough = ["noinline"]
// 12 rows (mc) x 32 (kc) of packed A
// CHECK: %[[AP:.*]] = memref.alloc() {alignment = 64 : i64} : memref<384xf32>
// CHECK: %[[NOTC:.*]] = arith.xori %[[FROMC]], %true
// CHECK: %[[KB:.*]] = arith.maxsi %[[K]], %c1
// CHECK: scf.for %[[PC:.*]] = %c0 to %[[KB]] step %c32
// CHECK: %[[KLEFT:.*]] = arith.subi %[[K]], %[[PC]]
// CHECK: %[[KC:.*]] = arith.minsi %[[KLEFT]], %c32
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[PC]], %c0
// CHECK: %[[FILLED:.*]] = arith.andi %[[NOTC]], %[[FIRST]]
// packing A: each row (the last tile's rows past m copy the last row) one vector copy,
// 32 (kc) apart
// CHECK: scf.for %[[R:.*]] = %c0 to %{{.*}} step %c1
// CHECK: %[[AR:.*]] = arith.addi %[[I0]], %[[R]]
// CHECK: %[[SRC:.*]] = arith.minsi %[[AR]], %{{.*}}
// CHECK: %[[DST:.*]] = arith.muli %[[R]], %c32
// CHECK: scf.for %[[KK:.*]] = %c0 to %{{.*}} step %c8
// CHECK: %[[AK:.*]] = arith.addi %[[PC]], %[[KK]]
// CHECK: %[[AV:.*]] = vector.load %[[A]][%[[SRC]], %[[AK]]]
// CHECK: %[[TO:.*]] = arith.addi %[[DST]], %[[KK]]
// CHECK: vector.store %[[AV]], %[[AP]][%[[TO]]]
// the row's tail under a mask
// CHECK: vector.maskedload %[[A]][%[[SRC]],
// CHECK: vector.maskedstore %[[AP]][
// the panels of the task, then its tiles
// CHECK: scf.for %[[P:.*]] = %[[P0]] to %[[P1]] step %c1
// CHECK: %[[J0:.*]] = arith.muli %[[P]], %c16
// CHECK: %[[PK:.*]] = arith.muli %[[P]], %[[K]]
// CHECK: %[[PKC:.*]] = arith.addi %[[PK]], %[[PC]]
// CHECK: %[[BB:.*]] = arith.muli %[[PKC]], %c16
// CHECK: scf.for %[[TT:.*]] = %c0 to %[[M]] step %c6
// CHECK: %[[ROW:.*]] = arith.addi %[[I0]], %[[TT]]
// CHECK: %[[AB:.*]] = arith.muli %[[TT]], %c32
// CHECK: scf.if
// CHECK: %[[FILLV:.*]] = vector.broadcast %[[FILL]] : f32 to vector<8xf32>
// CHECK: memref.prefetch %[[C]][%[[ROW]], %[[J0]]], write, locality<3>, data
// CHECK: %[[C0:.*]] = arith.select %[[FILLED]], %[[FILLV]], %[[ZERO:.*]] : vector<8xf32>
// CHECK: %[[T:.*]]:12 = scf.for %[[KI:.*]] = %c0 to %[[KC]] step %c1 iter_args(%{{.*}} = %[[C0]],
// CHECK: %[[BK:.*]] = arith.muli %[[KI]], %c16
// CHECK: %[[BO:.*]] = arith.addi %[[BB]], %[[BK]]
// CHECK: %[[BV:.*]] = vector.load %[[BP]][%[[BO]]]
// CHECK: %[[AO:.*]] = arith.addi %[[AB]], %[[KI]]
// CHECK: %[[AX2:.*]] = memref.load %[[AP]][%[[AO]]]
// CHECK: %[[ABC:.*]] = vector.broadcast %[[AX2]] : f32 to vector<8xf32>
// CHECK: vector.fma %[[ABC]], %[[BV]], %{{.*}} : vector<8xf32>
// CHECK: %[[OLD:.*]] = vector.load %[[C]][%[[ROW]], %[[J0]]]
// CHECK: %[[SUM:.*]] = arith.addf %[[T]]#0, %[[OLD]]
// CHECK: %[[NEW:.*]] = arith.select %[[FILLED]], %[[T]]#0, %[[SUM]]
// CHECK: vector.store %[[NEW]], %[[C]][%[[ROW]], %[[J0]]]
// the edge tiles: masked, rows clamped
// CHECK: } else {
// CHECK: vector.create_mask
// CHECK: vector.maskedload %[[C]]
// CHECK: vector.maskedstore %[[C]]
// CHECK: memref.dealloc %[[AP]]
// CHECK: return

// The skinny function: for each panel, the tile of exactly m rows (1 to 6, one branch
// each) over the whole K, A read where it is, the panel's columns past N masked, the
// tile starting from C when fromC, else from the fill.
// CHECK-LABEL: func.func private @qkv_gemm_skinny_f32_6x16
// CHECK-SAME: (%[[A:[a-z0-9]+]]: memref<?x?xf32, strided<[?, 1], offset: ?>>, %[[BP:[a-z0-9]+]]: memref<?xf32, strided<[1], offset: ?>>, %[[C:[a-z0-9]+]]: memref<?x?xf32, strided<[?, 1], offset: ?>>, %[[I0:[a-z0-9]+]]: index, %[[M:[a-z0-9]+]]: index, %[[P0:[a-z0-9]+]]: index, %[[P1:[a-z0-9]+]]: index, %[[N:[a-z0-9]+]]: index, %[[K:[a-z0-9]+]]: index, %[[FILL:[a-z0-9]+]]: f32, %[[FROMC:[a-z0-9]+]]: i1)
// CHECK: scf.for %[[P:.*]] = %[[P0]] to %[[P1]] step %c1
// CHECK: %[[J0:.*]] = arith.muli %[[P]], %c16
// CHECK: %[[COLS:.*]] = arith.subi %[[N]], %[[J0]]
// CHECK: %[[PK:.*]] = arith.muli %[[P]], %[[K]]
// CHECK: %[[BASE:.*]] = arith.muli %[[PK]], %c16
// CHECK: %[[MASK:.*]] = vector.create_mask %[[COLS]] : vector<8xi1>
// CHECK: %[[FILLV:.*]] = vector.broadcast %[[FILL]]
// CHECK: %[[ONE:.*]] = arith.cmpi eq, %[[M]], %c1
// CHECK: scf.if %[[ONE]]
// CHECK: %[[OLD:.*]] = vector.maskedload %[[C]][%[[I0]], %[[J0]]], %[[MASK]]
// CHECK: %[[START:.*]] = arith.select %[[FROMC]], %[[OLD]], %[[FILLV]]
// CHECK: %{{.*}}:2 = scf.for %[[KK:.*]] = %c0 to %[[K]] step %c1 iter_args(%{{.*}} = %[[START]],
// CHECK: %[[KN:.*]] = arith.muli %[[KK]], %c16
// CHECK: %[[BO:.*]] = arith.addi %[[BASE]], %[[KN]]
// CHECK: vector.load %[[BP]][%[[BO]]]
// CHECK: memref.load %[[A]][%[[I0]], %[[KK]]]
// CHECK: vector.fma
// CHECK: vector.maskedstore %[[C]][%[[I0]], %[[J0]]], %[[MASK]]
// CHECK: arith.cmpi eq, %[[M]], %c2
// CHECK: arith.cmpi eq, %[[M]], %c6
// CHECK: scf.for {{.*}} -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)

// The packed params, for the runtime: argument 1 in f32 panels of 16 columns and rows
// one by one, then argument 2.
// CHECK: llvm.mlir.global external constant @qkv_packed_params("1:16:1:f32:1,2:16:1:f32:1\00")
