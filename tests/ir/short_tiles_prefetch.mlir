// qkv-lower-attention-to-flash: the short tiles' prefetches (FlashSchedule::prefetch).
// RUN: qkv-opt %s --pass-pipeline="builtin.module(qkv-lower-attention-to-flash{vector-bits=512},canonicalize,cse)" | FileCheck %s --check-prefix=DEFAULT

// The short tiles (a dynamic length without a mask: 9..16 and 17..32 queries; the decode
// kernel keeps at most 8) prefetch while they compute: each step of QK^T one line of the
// value rows of its register tile's keys (16 rows with tiles of one vector), the row kept
// inside the key tile; each step of P.V one line of the next key tile's key rows, the row
// kept inside the segment. The default tiles (64 queries) do not.
// DEFAULT-LABEL: func.func @short_tiles_prefetch
// DEFAULT: %[[K:.*]] = bufferization.to_buffer %arg1
// DEFAULT: %[[V:.*]] = bufferization.to_buffer %arg2
// The decode kernel and the short tiles are deferred: outlined, each called with the values
// it uses (for the short tiles, v and k 6th and 7th), their bodies after this function.
// DEFAULT: arith.cmpi ule, %{{.*}}, %c8 : index
// DEFAULT: call @qkv_deferred_schedule_0(
// DEFAULT: arith.cmpi ule, %{{.*}}, %c16 : index
// DEFAULT: call @qkv_deferred_schedule_1(%{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %[[V]], %[[K]],
// DEFAULT: arith.cmpi ule, %{{.*}}, %c32 : index
// DEFAULT: call @qkv_deferred_schedule_2(%{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %[[V]], %[[K]],
// DEFAULT: memref.alloca() {alignment = 64 : i64} : memref<66x64xf32>
// DEFAULT-NOT: memref.prefetch
// DEFAULT: return
// DEFAULT-LABEL: func.func private @qkv_deferred_schedule_1(
// DEFAULT-SAME: %[[V1:arg5]]: memref<1x2x?x128xf32, strided<[?, ?, ?, 1], offset: ?>>, %[[K1:arg6]]: memref<1x2x?x128xf32
// DEFAULT: memref.alloca() {alignment = 64 : i64} : memref<256x16xf32>
// DEFAULT: %{{.*}}:16 = scf.for %{{.*}} = %c0 to %c128 step %c1 iter_args(
// DEFAULT: arith.remui %{{.*}}, %c128 : index
// DEFAULT: %[[VROW:.*]] = arith.minsi %{{.*}}, %{{.*}} : index
// DEFAULT: %[[VAT:.*]] = arith.addi %{{.*}}, %[[VROW]] : index
// DEFAULT: memref.prefetch %[[V1]][%c0, %{{.*}}, %[[VAT]], %{{.*}}], read, locality<2>, data
// The rows past the last whole register tile, one at a time, prefetch the same way.
// DEFAULT: memref.prefetch %[[V1]]
// DEFAULT: %[[KROW:.*]] = arith.minsi %{{.*}}, %{{.*}} : index
// DEFAULT-NEXT: arith.muli %{{.*}}, %c16 : index
// DEFAULT-NEXT: memref.prefetch %[[K1]][%c0, %{{.*}}, %[[KROW]], %{{.*}}], read, locality<2>, data
// DEFAULT-LABEL: func.func private @qkv_deferred_schedule_2(
// DEFAULT-SAME: %[[V2:arg5]]: memref<1x2x?x128xf32, strided<[?, ?, ?, 1], offset: ?>>, %[[K2:arg6]]: memref<1x2x?x128xf32
// DEFAULT: memref.alloca() {alignment = 64 : i64} : memref<256x32xf32>
// DEFAULT: memref.prefetch %[[V2]]
// DEFAULT: memref.prefetch %[[K2]]
func.func @short_tiles_prefetch(%q: tensor<1x2x?x128xf32>, %k: tensor<1x2x?x128xf32>, %v: tensor<1x2x?x128xf32>) -> tensor<1x2x?x128xf32> {
  %a = qkv.attention %q, %k, %v : tensor<1x2x?x128xf32>, tensor<1x2x?x128xf32>, tensor<1x2x?x128xf32> -> tensor<1x2x?x128xf32>
  return %a : tensor<1x2x?x128xf32>
}
