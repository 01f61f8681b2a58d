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
// DEFAULT: arith.cmpi ule, %{{.*}}, %c8 : index
// DEFAULT: arith.cmpi ule, %{{.*}}, %c16 : index
// DEFAULT: memref.alloca() {alignment = 64 : i64} : memref<256x16xf32>
// DEFAULT: %{{.*}}:16 = scf.for %{{.*}} = %c0 to %c128 step %c1 iter_args(
// DEFAULT: arith.remui %{{.*}}, %c128 : index
// DEFAULT: %[[VROW:.*]] = arith.minsi %{{.*}}, %{{.*}} : index
// DEFAULT: %[[VAT:.*]] = arith.addi %{{.*}}, %[[VROW]] : index
// DEFAULT: memref.prefetch %[[V]][%c0, %{{.*}}, %[[VAT]], %{{.*}}], read, locality<2>, data
// The rows past the last whole register tile, one at a time, prefetch the same way.
// DEFAULT: memref.prefetch %[[V]]
// DEFAULT: %[[KROW:.*]] = arith.minsi %{{.*}}, %{{.*}} : index
// DEFAULT-NEXT: arith.muli %{{.*}}, %c16 : index
// DEFAULT-NEXT: memref.prefetch %[[K]][%c0, %{{.*}}, %[[KROW]], %{{.*}}], read, locality<2>, data
// DEFAULT: arith.cmpi ule, %{{.*}}, %c32 : index
// DEFAULT: memref.alloca() {alignment = 64 : i64} : memref<256x32xf32>
// DEFAULT: memref.prefetch %[[V]]
// DEFAULT: memref.prefetch %[[K]]
// DEFAULT: memref.alloca() {alignment = 64 : i64} : memref<66x64xf32>
// DEFAULT-NOT: memref.prefetch
// DEFAULT: return
func.func @short_tiles_prefetch(%q: tensor<1x2x?x128xf32>, %k: tensor<1x2x?x128xf32>, %v: tensor<1x2x?x128xf32>) -> tensor<1x2x?x128xf32> {
  %a = qkv.attention %q, %k, %v : tensor<1x2x?x128xf32>, tensor<1x2x?x128xf32>, tensor<1x2x?x128xf32> -> tensor<1x2x?x128xf32>
  return %a : tensor<1x2x?x128xf32>
}
