// qkv-lower-matmul-to-microkernels on the amx tier (docs/compiler.md, "ISA tiers"): a
// linalg.matmul of bf16 operands into f32 runs its blocks on AMX tiles. B is packed in
// the dot tier's pairs of rows, its K padded with zero rows to whole tiles of 32 (so the
// runtime packs a weight with row_multiple 32); A's rows are packed as bf16, the last
// tile of K columns zeroed first. Each 32 x 32 tile of C is four accumulator tiles
// carried through the K loop, each step two A tiles (rows kc + 32 apart, so that a tile's
// rows are not a multiple of 4 KiB apart when kc is 2048) and two B tiles (pair
// rows 2 * nr = 128 apart) and four tdpbf16ps (amx.tile_mulf). A whole tile starts from C
// or from the start row (a stride of 0) and is stored as tiles; one at C's edges goes
// through a scratch tile under masks. A task of at most 6 rows takes the vdpbf16ps skinny
// form.
// RUN: qkv-opt %s --pass-pipeline="builtin.module(qkv-lower-matmul-to-microkernels{vector-bits=512 kc=32 mc=12 isa=amx},canonicalize,cse)" | FileCheck %s

// CHECK-LABEL: func.func @weights
// CHECK-SAME: memref<?xbf16> {qkv.packed_param = 1 : i64, qkv.panel_columns = 64 : i64, qkv.panel_rows = 2 : i64, qkv.row_multiple = 32 : i64}
// CHECK: memref.subview %arg3[0] [4096] [1]
// CHECK: func.call @qkv_gemm_skinny_bf16_amx_6x64(
// CHECK: func.call @qkv_gemm_block_bf16_amx_32x64_k32(
func.func @weights(%a: memref<?x7xbf16> {qkv.name = "x"}, %b: memref<7x70xbf16> {qkv.name = "w", qkv.param}, %c: memref<?x70xf32>) attributes {llvm.emit_c_interface} {
  linalg.matmul ins(%a, %b : memref<?x7xbf16>, memref<7x70xbf16>) outs(%c : memref<?x70xf32>)
  return
}

// A B packed on every call: 2 panels x 32 rows (7 padded) x 64 columns.
// CHECK-LABEL: func.func @activations
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<4096xbf16>
// CHECK: func.call @qkv_gemm_pack_b_bf16_amx_64(
func.func @activations(%a: memref<?x7xbf16>, %b: memref<7x70xbf16>, %c: memref<?x70xf32>) {
  linalg.matmul ins(%a, %b : memref<?x7xbf16>, memref<7x70xbf16>) outs(%c : memref<?x70xf32>)
  return
}

// CHECK-LABEL: func.func private @qkv_gemm_block_bf16_amx_32x64_k32
// The packed A block (mc rounded up to 32 rows, kc + 32 columns), the scratch tile, the
// fill row.
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<2048xbf16>
// CHECK: %[[SCRATCH:.*]] = memref.alloca() {alignment = 64 : i64} : memref<1024xf32>
// CHECK: %[[FILL:.*]] = memref.alloca() {alignment = 64 : i64} : memref<32xf32>
// The ragged last tile of K: zeros, then A's columns over them.
// CHECK: vector.store %{{.*}}, %{{.*}} : memref<2048xbf16>, vector<32xbf16>
// CHECK: vector.load %arg0
// Before a row tile's products, a write prefetch of each line of C it writes: its rows by
// the panel's 64 f32 columns, four lines a row (columns clamped to C's last).
// CHECK: scf.for %{{.*}} = %c0 to %{{.*}} step %c1 {
// CHECK-COUNT-4: memref.prefetch %arg2[%{{.*}}, %{{.*}}], write, locality<3>, data
// CHECK-NOT: memref.prefetch
// A whole tile: from the fill row (stride 0) in the first K block, else from C.
// CHECK: scf.if %{{.*}} -> (!amx.tile<16x16xf32>, !amx.tile<16x16xf32>, !amx.tile<16x16xf32>, !amx.tile<16x16xf32>)
// CHECK: amx.tile_load %[[FILL]][%{{.*}}], %c0 : memref<32xf32> into !amx.tile<16x16xf32>
// CHECK: } else {
// CHECK: amx.tile_load %arg2[%{{.*}}, %{{.*}}] : memref<?x?xf32, strided<[?, 1], offset: ?>> into !amx.tile<16x16xf32>
// CHECK: scf.for %{{.*}} iter_args(%[[C00:.*]] = %{{.*}}#0, %[[C01:.*]] = %{{.*}}#1, %[[C10:.*]] = %{{.*}}#2, %[[C11:.*]] = %{{.*}}#3)
// CHECK: %[[A0:.*]] = amx.tile_load %{{.*}}[%{{.*}}], %c64 : memref<2048xbf16> into !amx.tile<16x32xbf16>
// CHECK: %[[A1:.*]] = amx.tile_load %{{.*}}[%{{.*}}], %c64 : memref<2048xbf16> into !amx.tile<16x32xbf16>
// CHECK: %[[B0:.*]] = amx.tile_load %arg1[%{{.*}}], %c128 : memref<?xbf16, strided<[1], offset: ?>> into !amx.tile<16x32xbf16>
// CHECK: %[[B1:.*]] = amx.tile_load %arg1[%{{.*}}], %c128 : memref<?xbf16, strided<[1], offset: ?>> into !amx.tile<16x32xbf16>
// CHECK: amx.tile_mulf %[[A0]], %[[B0]], %[[C00]]
// CHECK: amx.tile_mulf %[[A0]], %[[B1]], %[[C01]]
// CHECK: amx.tile_mulf %[[A1]], %[[B0]], %[[C10]]
// CHECK: amx.tile_mulf %[[A1]], %[[B1]], %[[C11]]
// CHECK-COUNT-4: amx.tile_store %arg2[
// At C's edges: from zero, through the scratch tile, stored under masks.
// CHECK: amx.tile_zero : !amx.tile<16x16xf32>
// CHECK: scf.for
// CHECK: amx.tile_mulf
// CHECK-COUNT-4: amx.tile_store %[[SCRATCH]][%{{.*}}], %{{.*}}, %c32
// CHECK: vector.maskedstore %arg2

// B's packing: K rounded up to 32, pairs of rows interleaved, rows past K masked off.
// CHECK-LABEL: func.func private @qkv_gemm_pack_b_bf16_amx_64
// CHECK: arith.addi %arg5, %c31
// CHECK: arith.divui %{{.*}}, %c32
// CHECK: vector.maskedload
// CHECK: vector.interleave
