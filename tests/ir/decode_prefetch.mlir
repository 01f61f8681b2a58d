// qkv-lower-attention-to-flash: the decode kernel's prefetches of the next key tile.
// RUN: qkv-opt %s --pass-pipeline="builtin.module(qkv-lower-attention-to-flash{vector-bits=512},canonicalize,cse)" | FileCheck %s
// RUN: qkv-opt %s --pass-pipeline="builtin.module(qkv-lower-attention-to-flash{vector-bits=512 isa=f32},canonicalize,cse)" | FileCheck %s --check-prefix=BF16

// Four queries per kv head (Dh = 128: eight 64-byte lines a row) in two groups of two rows.
// While a group computes, each key's step prefetches the group's share of the key row (in
// the scores) and of the value row (in the values) one tile (66 keys) on, at most the
// split's last key: group g of 2 takes lines [8 g / 2, 8 (g + 1) / 2), so the two groups
// request the next tile once between them.
// CHECK-LABEL: func.func @decode_prefetch
// CHECK: %[[K:.*]] = bufferization.to_buffer %arg1
// CHECK: %[[V:.*]] = bufferization.to_buffer %arg2
// CHECK: scf.parallel
// CHECK: %[[END:.*]] = arith.minsi %{{.*}}, %dim : index
// CHECK: scf.for %[[J0:.*]] = %{{.*}} to %[[END]] step %c66
// CHECK: scf.for %[[R0:.*]] = %c0 to %c4 step %c2
// CHECK: %[[G:.*]] = arith.divui %[[R0]], %c2 : index
// CHECK: %[[LAST:.*]] = arith.subi %[[END]], %c1 : index
// CHECK: %[[G1:.*]] = arith.addi %[[G]], %c1 : index
// CHECK: %[[LO8:.*]] = arith.muli %[[G]], %c8 : index
// CHECK: %[[LO:.*]] = arith.divui %[[LO8]], %c2 : index
// CHECK: %[[HI8:.*]] = arith.muli %[[G1]], %c8 : index
// CHECK: %[[HI:.*]] = arith.divui %[[HI8]], %c2 : index
// the scores, eight keys a block
// CHECK: scf.for %[[J:.*]] = %c0 to %{{.*}} step %c8
// CHECK: %[[KEY:.*]] = arith.addi %[[J0]], %[[J]] : index
// CHECK: %[[AHEAD:.*]] = arith.addi %[[KEY]], %c66 : index
// CHECK: %[[ROW:.*]] = arith.minsi %[[AHEAD]], %[[LAST]] : index
// CHECK: scf.for %[[LINE:.*]] = %[[LO]] to %[[HI]] step %c1
// CHECK-NEXT: %[[COL:.*]] = arith.muli %[[LINE]], %c16 : index
// CHECK-NEXT: memref.prefetch %[[K]][%c0, %{{.*}}, %[[ROW]], %[[COL]]], read, locality<2>, data
// the values, one key a step, the group's output rows in registers
// CHECK: scf.for %[[VJ:.*]] = %c0 to %{{.*}} step %c1 iter_args(
// CHECK: %[[VKEY:.*]] = arith.addi %[[J0]], %[[VJ]] : index
// CHECK: %[[VAHEAD:.*]] = arith.addi %[[VKEY]], %c66 : index
// CHECK: %[[VROW:.*]] = arith.minsi %[[VAHEAD]], %[[LAST]] : index
// CHECK: scf.for %[[VLINE:.*]] = %[[LO]] to %[[HI]] step %c1
// CHECK-NEXT: %[[VCOL:.*]] = arith.muli %[[VLINE]], %c16 : index
// CHECK-NEXT: memref.prefetch %[[V]][%c0, %{{.*}}, %[[VROW]], %[[VCOL]]], read, locality<2>, data
// CHECK: return
func.func @decode_prefetch(%q: tensor<1x2x4x128xf32>, %k: tensor<1x2x?x128xf32>, %v: tensor<1x2x?x128xf32>) -> tensor<1x2x4x128xf32> {
  %a = qkv.attention %q, %k, %v : tensor<1x2x4x128xf32>, tensor<1x2x?x128xf32>, tensor<1x2x?x128xf32> -> tensor<1x2x4x128xf32>
  return %a : tensor<1x2x4x128xf32>
}

// Keys and values stored in bf16 (read widened): a line holds 32 of them, so a row of 128
// is four lines, all of them this single group's (two queries).
// BF16-LABEL: func.func @decode_prefetch_bf16
// BF16: %[[K:.*]] = bufferization.to_buffer %arg1 read_only : tensor<1x2x?x128xbf16>
// BF16: %[[V:.*]] = bufferization.to_buffer %arg2 read_only : tensor<1x2x?x128xbf16>
// BF16: scf.for %[[LINE:.*]] = %c0 to %c4 step %c1
// BF16-NEXT: %[[COL:.*]] = arith.muli %[[LINE]], %c32 : index
// BF16-NEXT: memref.prefetch %[[K]][%c0, %{{.*}}, %{{.*}}, %[[COL]]], read, locality<2>, data
// BF16: scf.for %{{.*}} = %c0 to %{{.*}} step %c1 iter_args(
// BF16: scf.for %[[VLINE:.*]] = %c0 to %c4 step %c1
// BF16-NEXT: %[[VCOL:.*]] = arith.muli %[[VLINE]], %c32 : index
// BF16-NEXT: memref.prefetch %[[V]][%c0, %{{.*}}, %{{.*}}, %[[VCOL]]], read, locality<2>, data
func.func @decode_prefetch_bf16(%q: tensor<1x2x2x128xf32>, %k: tensor<1x2x?x128xbf16>, %v: tensor<1x2x?x128xbf16>) -> tensor<1x2x2x128xf32> {
  %k1 = arith.extf %k : tensor<1x2x?x128xbf16> to tensor<1x2x?x128xf32>
  %v1 = arith.extf %v : tensor<1x2x?x128xbf16> to tensor<1x2x?x128xf32>
  %a = qkv.attention %q, %k1, %v1 : tensor<1x2x2x128xf32>, tensor<1x2x?x128xf32>, tensor<1x2x?x128xf32> -> tensor<1x2x2x128xf32>
  return %a : tensor<1x2x2x128xf32>
}

// One query row per kv head (MHA decoding one token): no prefetches, nothing to overlap.
// CHECK-LABEL: func.func @decode_one_row
// CHECK-NOT: memref.prefetch
// CHECK: return
func.func @decode_one_row(%q: tensor<1x2x1x128xf32>, %k: tensor<1x2x?x128xf32>, %v: tensor<1x2x?x128xf32>) -> tensor<1x2x1x128xf32> {
  %a = qkv.attention %q, %k, %v : tensor<1x2x1x128xf32>, tensor<1x2x?x128xf32>, tensor<1x2x?x128xf32> -> tensor<1x2x1x128xf32>
  return %a : tensor<1x2x1x128xf32>
}
