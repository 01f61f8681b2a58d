// qkv-lower-attention-to-gpu-tiles: attention -> one scf.forall over (query tile, head,
// batch) mapped to GPU blocks; inside, scf.foralls of q-tile threads run one after the
// other (initialise; per key tile the mask does not prove empty: stage keys and values,
// score, without mask code in a full tile; write); the block's
// buffers are allocas marked qkv.workgroup, the mask is inlined, exp2 for the softmax.
// The buffers must fit in 48 KiB (fewer rows per block); head dims must be static
// (lower_attention_to_gpu_tiles_invalid.mlir).
// RUN: qkv-opt %s --split-input-file --pass-pipeline="builtin.module(qkv-lower-attention-to-gpu-tiles,canonicalize)" | FileCheck %s
// RUN: qkv-opt %s --split-input-file --pass-pipeline="builtin.module(qkv-lower-attention-to-gpu-tiles{q-tile=32 kv-tile=16},canonicalize)" | FileCheck %s --check-prefix=SMALL

// CHECK-LABEL: func.func @causal
// CHECK: %[[NQT:.*]] = arith.divui
// CHECK: scf.forall (%[[QT:.*]], %[[H:.*]], %[[B:.*]]) in (%[[NQT]], 2, %{{.*}}) {
// CHECK-DAG: memref.alloca() {alignment = 64 : i64, qkv.workgroup} : memref<64xf32>
// CHECK-DAG: memref.alloca() {alignment = 64 : i64, qkv.workgroup} : memref<64x16xf32>
// CHECK-DAG: memref.alloca() {alignment = 64 : i64, qkv.workgroup} : memref<32x16xf32>
// CHECK: scf.forall (%{{.*}}) in (64) {
// CHECK: } {mapping = [#gpu.thread<x>]}
// The key tiles: the causal mask's interval evaluation (the tile's last query >= its
// first key) skips a tile the mask proves empty, for the whole block.
// CHECK: scf.for
// CHECK: %[[FULL:.*]] = arith.cmpi sge
// CHECK-NEXT: %[[NONEMPTY:.*]] = arith.cmpi sge
// CHECK-NEXT: scf.if %[[NONEMPTY]] {
// CHECK: scf.forall (%{{.*}}) in (64) {
// CHECK: } {mapping = [#gpu.thread<x>]}
// CHECK: scf.forall (%{{.*}}) in (64) {
// A full tile scores without the mask, the others with it.
// CHECK: scf.if %[[FULL]] -> (f32) {
// CHECK: } else {
// CHECK: arith.cmpi sge
// CHECK: math.exp2
// CHECK: } {mapping = [#gpu.thread<x>]}
// CHECK: scf.forall (%{{.*}}) in (64) {
// CHECK: arith.divf
// CHECK: } {mapping = [#gpu.thread<x>]}
// CHECK: } {mapping = [#gpu.block<x>, #gpu.block<y>, #gpu.block<z>]}
// CHECK-NOT: qkv.attention
// SMALL-LABEL: func.func @causal
// SMALL: memref.alloca() {alignment = 64 : i64, qkv.workgroup} : memref<32x16xf32>
// SMALL: memref.alloca() {alignment = 64 : i64, qkv.workgroup} : memref<16x16xf32>
// SMALL: scf.forall (%{{.*}}) in (32) {
func.func @causal(%q: tensor<?x2x?x16xf32>, %k: tensor<?x2x?x16xf32>, %v: tensor<?x2x?x16xf32>) -> tensor<?x2x?x16xf32> {
  %0 = qkv.attention %q, %k, %v : tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32> -> tensor<?x2x?x16xf32> mask {
  ^bb0(%b: index, %h: index, %qi: index, %kv: index, %len_q: index, %len_kv: index):
    %1 = arith.cmpi sge, %qi, %kv : index
    qkv.yield %1 : i1
  }
  return %0 : tensor<?x2x?x16xf32>
}

// -----

// Head dim 128: the buffers of 64 rows take (2 x 64 + 64 x 128 + 32 x 256) x 4 bytes = 66 KB,
// of 32 rows 49 408 bytes, still over 48 KiB (49 152); 16 rows fit.
// CHECK-LABEL: func.func @wide_heads
// CHECK: memref.alloca() {alignment = 64 : i64, qkv.workgroup} : memref<16x128xf32>
// CHECK: scf.forall (%{{.*}}) in (16) {
func.func @wide_heads(%q: tensor<1x1x?x128xf32>, %k: tensor<1x1x?x128xf32>, %v: tensor<1x1x?x128xf32>) -> tensor<1x1x?x128xf32> {
  %0 = qkv.attention %q, %k, %v : tensor<1x1x?x128xf32>, tensor<1x1x?x128xf32>, tensor<1x1x?x128xf32> -> tensor<1x1x?x128xf32>
  return %0 : tensor<1x1x?x128xf32>
}
