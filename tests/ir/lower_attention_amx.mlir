// qkv-lower-attention-to-flash on the amx tier (docs/compiler.md, "ISA tiers"): a bf16
// attention's tiled kernel runs both products on AMX tiles. K and V are packed once per
// call, before the query tiles, in a parallel loop of their own, one key row at a time:
// K's row as it is (masked loads; zeros past Dh and past the last key), V's row scattered
// into its column of V transposed. A cache view is packed segment by segment (its stored
// rows, this call's, then zeros), one key tile more (@amx_view). The query tile is packed in pairs of head dims as on avx512bf16; Q.K^T
// runs on 32 x 32 blocks of sT (four f32 accumulator tiles, each from its own
// tile_zero) over tiles of 32 head dims; P.V loads oT's tiles (after the rescale by
// corr), adds V^T . P^T over tiles of 32 keys and stores them back. The key tile is
// 64 keys (the default 66 cut to whole blocks of 32). Query tiles that are not whole
// blocks of 32 keep the pairs (vdpbf16ps).
// RUN: qkv-opt %s --pass-pipeline="builtin.module(qkv-lower-attention-to-flash{vector-bits=512 isa=amx},canonicalize,cse)" | FileCheck %s
// RUN: qkv-opt %s --pass-pipeline="builtin.module(qkv-lower-attention-to-flash{vector-bits=512 isa=amx q-tile=48},canonicalize,cse)" | FileCheck %s --check-prefix=PAIRS

// The variant's name says the tiles are AMX's (Kernel::schedule_runs, qkv bench).
// CHECK: @qkv_schedules("{{[^,]*}}:tiled_amx(q=64),{{[^,]*}}:tiled_amx(q=64)\00")
// PAIRS: @qkv_schedules("{{[^,]*}}:tiled(q=48),{{[^,]*}}:tiled(q=48)\00")
// CHECK-LABEL: func.func @amx
// The packed K and V: 1 x 2 heads x 128 keys (70 rounded up to key tiles of 64) x 64.
// CHECK: %[[KA:.*]] = memref.alloc() {alignment = 64 : i64} : memref<16384xbf16>
// CHECK: %[[K:.*]] = memref.cast %[[KA]]
// CHECK: %[[VA:.*]] = memref.alloc() {alignment = 64 : i64} : memref<16384xbf16>
// CHECK: %[[V:.*]] = memref.cast %[[VA]]
// CHECK: scf.parallel
// CHECK: vector.maskedload %{{.*}} : memref<1x2x70x64xbf16, {{.*}}>, vector<32xi1>, vector<32xbf16> into vector<32xbf16>
// CHECK: vector.store %{{.*}}, %[[KA]][%{{.*}}] : memref<16384xbf16>, vector<32xbf16>
// CHECK: vector.maskedload %{{.*}} : memref<1x2x70x64xbf16, {{.*}}>, vector<16xi1>, vector<16xbf16> into vector<16xbf16>
// CHECK: vector.scatter %[[V]][%{{.*}}] [%{{.*}}], %{{.*}}, %{{.*}} : memref<?xbf16>, vector<16xindex>, vector<16xi1>, vector<16xbf16>
// Rows 70 to 127, past the last key: zeros.
// CHECK: arith.maxsi %{{.*}}, %c70 : index
// CHECK: vector.store %{{.*}}, %[[KA]][%{{.*}}] : memref<16384xbf16>, vector<32xbf16>
// The query tiles: qT (32 pairs x 128), sT (64 keys x 64 queries), oT, pT.
// CHECK: scf.parallel
// CHECK: %[[QT:.*]] = memref.alloca() {alignment = 64 : i64} : memref<32x128xbf16>
// CHECK: %[[ST:.*]] = memref.alloca() {alignment = 64 : i64} : memref<64x64xf32>
// CHECK: %[[OT:.*]] = memref.alloca() {alignment = 64 : i64} : memref<64x64xf32>
// CHECK: %[[PT:.*]] = memref.alloca() {alignment = 64 : i64} : memref<32x128xbf16>
// CHECK: vector.interleave
// Q.K^T: four accumulators, two K tiles (rows Dh = 64 apart) and two qT tiles per step.
// CHECK: %[[Z0:.*]] = amx.tile_zero : !amx.tile<16x16xf32>
// CHECK-NEXT: %[[Z1:.*]] = amx.tile_zero : !amx.tile<16x16xf32>
// CHECK-NEXT: %[[Z2:.*]] = amx.tile_zero : !amx.tile<16x16xf32>
// CHECK-NEXT: %[[Z3:.*]] = amx.tile_zero : !amx.tile<16x16xf32>
// CHECK-NEXT: scf.for {{.*}} iter_args(%{{.*}} = %[[Z0]], %{{.*}} = %[[Z1]], %{{.*}} = %[[Z2]], %{{.*}} = %[[Z3]])
// CHECK: amx.tile_load %[[K]][%{{.*}}], %c64 : memref<?xbf16> into !amx.tile<16x32xbf16>
// CHECK: amx.tile_load %[[K]][%{{.*}}], %c64 : memref<?xbf16> into !amx.tile<16x32xbf16>
// CHECK: amx.tile_load %[[QT]][%{{.*}}, %c0] : memref<32x128xbf16> into !amx.tile<16x32xbf16>
// CHECK: amx.tile_load %[[QT]][%{{.*}}, %c32] : memref<32x128xbf16> into !amx.tile<16x32xbf16>
// CHECK-COUNT-4: amx.tile_mulf
// CHECK: amx.tile_store %[[ST]][%{{.*}}, %c0], %{{.*}}#0 : memref<64x64xf32>, !amx.tile<16x16xf32>
// CHECK: amx.tile_store %[[ST]][%{{.*}}, %c16], %{{.*}}#1
// The softmax writes P's pairs (rounded to bf16) into pT.
// CHECK: arith.truncf %{{.*}} : vector<16xf32> to vector<16xbf16>
// CHECK: vector.store %{{.*}}, %[[PT]]
// pT's pairs past the tile's keys are zeros, up to the last whole tile of 32 keys.
// CHECK: vector.store %{{.*}}, %[[PT]][%{{.*}}, %c0] : memref<32x128xbf16>, vector<32xbf16>
// oT *= corr, then V^T . P^T added on tiles: oT's tiles in, V's (rows 128 keys apart) and
// pT's per step, oT's tiles out.
// CHECK: arith.mulf
// CHECK: %[[O0:.*]] = amx.tile_load %[[OT]][%{{.*}}, %c0] : memref<64x64xf32> into !amx.tile<16x16xf32>
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %[[O0]]
// CHECK: amx.tile_load %[[V]][%{{.*}}], %c128 : memref<?xbf16> into !amx.tile<16x32xbf16>
// CHECK: amx.tile_load %[[V]][%{{.*}}], %c128 : memref<?xbf16> into !amx.tile<16x32xbf16>
// CHECK: amx.tile_load %[[PT]][%{{.*}}, %c0] : memref<32x128xbf16> into !amx.tile<16x32xbf16>
// CHECK-COUNT-4: amx.tile_mulf
// CHECK: amx.tile_store %[[OT]][%{{.*}}, %c0], %{{.*}}#0 : memref<64x64xf32>, !amx.tile<16x16xf32>
// Both packed buffers are freed after the query tiles.
// CHECK: memref.dealloc %[[KA]]
// CHECK: memref.dealloc %[[VA]]
// PAIRS-LABEL: func.func @amx
// PAIRS-NOT: amx.
// PAIRS: x86vector.avx512.dot
func.func @amx(%q: tensor<1x2x33x64xbf16>, %k: tensor<1x2x70x64xbf16>, %v: tensor<1x2x70x64xbf16>) -> tensor<1x2x33x64xf32> {
  %0 = arith.extf %q : tensor<1x2x33x64xbf16> to tensor<1x2x33x64xf32>
  %1 = arith.extf %k : tensor<1x2x70x64xbf16> to tensor<1x2x70x64xf32>
  %2 = arith.extf %v : tensor<1x2x70x64xbf16> to tensor<1x2x70x64xf32>
  %3 = qkv.attention %0, %1, %2 : tensor<1x2x33x64xf32>, tensor<1x2x70x64xf32>, tensor<1x2x70x64xf32> -> tensor<1x2x33x64xf32>
  return %3 : tensor<1x2x33x64xf32>
}

// A cache view (50 stored rows, 64 of this call's: 114 keys) on the AMX tiles too: 2 heads
// x 192 keys (114 rounded up to key tiles of 64, and one tile more: the fresh rows' tiles
// start at the stored length) x 64. Each key tile's rows segment by segment: stored rows
// below the length, read from the cache, this call's from k (row - length), then zeros.
// CHECK-LABEL: func.func @amx_view
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<24576xbf16>
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<24576xbf16>
// CHECK: scf.parallel (%{{.*}}, %{{.*}}) = (%c0, %c0) to (%c2, %c3)
// CHECK: %[[LEN:.*]] = arith.index_cast %{{.*}} : i64 to index
// CHECK: vector.maskedload %{{.*}} : memref<1x2x50x64xbf16, {{.*}}>, vector<32xi1>, vector<32xbf16> into vector<32xbf16>
// CHECK: vector.maskedload %{{.*}} : memref<1x2x50x64xbf16, {{.*}}>, vector<16xi1>, vector<16xbf16> into vector<16xbf16>
// CHECK: vector.scatter
// CHECK: arith.subi %{{.*}}, %[[LEN]] : index
// CHECK: vector.maskedload %{{.*}} : memref<1x2x64x64xbf16, {{.*}}>, vector<32xi1>, vector<32xbf16> into vector<32xbf16>
// CHECK: vector.maskedload %{{.*}} : memref<1x2x64x64xbf16, {{.*}}>, vector<16xi1>, vector<16xbf16> into vector<16xbf16>
// CHECK: vector.scatter
// CHECK: amx.tile_mulf
func.func @amx_view(%q: tensor<1x2x64x64xbf16>, %past: tensor<1x2x50x64xbf16>, %len: tensor<1xi64>, %k: tensor<1x2x64x64xbf16>, %v: tensor<1x2x64x64xbf16>) -> tensor<1x2x64x64xf32> {
  %kc = qkv.cache_view %past[%len], %k : (tensor<1x2x50x64xbf16>, tensor<1xi64>, tensor<1x2x64x64xbf16>) -> tensor<1x2x114x64xbf16>
  %vc = qkv.cache_view %past[%len], %v : (tensor<1x2x50x64xbf16>, tensor<1xi64>, tensor<1x2x64x64xbf16>) -> tensor<1x2x114x64xbf16>
  %0 = arith.extf %q : tensor<1x2x64x64xbf16> to tensor<1x2x64x64xf32>
  %1 = arith.extf %kc : tensor<1x2x114x64xbf16> to tensor<1x2x114x64xf32>
  %2 = arith.extf %vc : tensor<1x2x114x64xbf16> to tensor<1x2x114x64xf32>
  %3 = qkv.attention %0, %1, %2 : tensor<1x2x64x64xf32>, tensor<1x2x114x64xf32>, tensor<1x2x114x64xf32> -> tensor<1x2x64x64xf32>
  return %3 : tensor<1x2x64x64xf32>
}
