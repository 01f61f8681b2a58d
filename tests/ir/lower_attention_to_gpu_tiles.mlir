// qkv-lower-attention-to-gpu-tiles: attention -> one scf.forall over (query tile, head,
// batch) mapped to GPU blocks; inside, scf.foralls of q-tile threads run one after the
// other (initialise; per key tile the mask does not prove empty: stage keys and values,
// score, without mask code in a full tile; write); the block's
// buffers are allocas marked qkv.workgroup, the mask is inlined, exp2 for the softmax.
// The buffers must fit in 48 KiB (fewer rows per block); head dims must be static
// (lower_attention_to_gpu_tiles_invalid.mlir).
// RUN: qkv-opt %s --split-input-file --pass-pipeline="builtin.module(qkv-lower-attention-to-gpu-tiles,canonicalize)" | FileCheck %s
// RUN: qkv-opt %s --split-input-file --pass-pipeline="builtin.module(qkv-lower-attention-to-gpu-tiles{q-tile=32 kv-tile=16},canonicalize)" | FileCheck %s --check-prefix=SMALL
// RUN: qkv-opt %s --split-input-file --pass-pipeline="builtin.module(qkv-lower-attention-to-gpu-tiles{mma=false},canonicalize)" | FileCheck %s --check-prefix=SIMT

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

// -----

// q, k and v widened from bf16: the tensor-core form. The block's query tile and each key
// and value tile are staged in bf16 (read from the bf16 tensors in place, widened on load
// and rounded back by arith.truncf: exact), the warps
// (64 rows: 4 warps of 16) compute S = Q K^T in 16x8x16 vector.contract tiles (Dh = 16:
// one k step; 32 keys: 4 n steps), the threads take the softmax step on S's rows and
// write P in bf16, the warps accumulate P V (32 keys: 2 k steps; Dv = 16: 2 n steps) into
// the f32 accumulator. With mma=false, the f32 SIMT form.
// CHECK-LABEL: func.func @bf16_tiles
// CHECK-DAG: memref.alloca() {alignment = 64 : i64, qkv.workgroup} : memref<32x16xbf16>
// CHECK-DAG: memref.alloca() {alignment = 64 : i64, qkv.workgroup} : memref<64x16xbf16>
// CHECK-DAG: memref.alloca() {alignment = 64 : i64, qkv.workgroup} : memref<64x32xf32>
// CHECK-DAG: memref.alloca() {alignment = 64 : i64, qkv.workgroup} : memref<64x32xbf16>
// CHECK: scf.forall (%{{.*}}) in (64) {
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: } {mapping = [#gpu.thread<x>]}
// CHECK: scf.for
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: } {mapping = [#gpu.thread<x>]}
// CHECK: scf.forall (%[[W:.*]]) in (4) {
// CHECK: %[[R0:.*]] = arith.muli %[[W]], %c16
// CHECK: %[[QF:.*]] = vector.transfer_read %{{.*}}[%[[R0]], %c0], %{{.*}} {in_bounds = [true, true]} : memref<64x16xbf16>, vector<16x16xbf16>
// CHECK: %[[KF:.*]] = vector.transfer_read %{{.*}}[%c0, %c0], %{{.*}} {in_bounds = [true, true]} : memref<32x16xbf16>, vector<8x16xbf16>
// CHECK: %[[S:.*]] = vector.contract {{.*}} %[[QF]], %[[KF]], %{{.*}} : vector<16x16xbf16>, vector<8x16xbf16> into vector<16x8xf32>
// CHECK: vector.transfer_write %[[S]], %{{.*}}[%[[R0]], %c0] {in_bounds = [true, true]} : vector<16x8xf32>, memref<64x32xf32>
// CHECK-COUNT-3: vector.contract
// CHECK: } {mapping = [#gpu.warp<x>]}
// CHECK: scf.forall (%{{.*}}) in (64) {
// CHECK: math.exp2
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: } {mapping = [#gpu.thread<x>]}
// CHECK: scf.forall (%{{.*}}) in (4) {
// CHECK: vector.transfer_read %{{.*}} : memref<64x32xbf16>, vector<16x16xbf16>
// CHECK: vector.transfer_read %{{.*}} : memref<64x16xf32>, vector<16x8xf32>
// CHECK: vector.transfer_read %{{.*}}[%c0, %c0], %{{.*}} : memref<32x16xbf16>, vector<16x8xbf16>
// CHECK: vector.contract {{.*}} : vector<16x16xbf16>, vector<16x8xbf16> into vector<16x8xf32>
// CHECK: vector.transfer_read %{{.*}}[%c16, %c0], %{{.*}} : memref<32x16xbf16>, vector<16x8xbf16>
// CHECK: vector.contract
// CHECK: vector.transfer_write
// CHECK-COUNT-2: vector.contract
// CHECK: } {mapping = [#gpu.warp<x>]}
// CHECK: } {mapping = [#gpu.block<x>, #gpu.block<y>, #gpu.block<z>]}
// SIMT-LABEL: func.func @bf16_tiles
// SIMT-NOT: vector.contract
// SIMT-NOT: #gpu.warp
// SIMT: } {mapping = [#gpu.block<x>, #gpu.block<y>, #gpu.block<z>]}
func.func @bf16_tiles(%q: tensor<?x2x?x16xbf16>, %k: tensor<?x2x?x16xbf16>, %v: tensor<?x2x?x16xbf16>) -> tensor<?x2x?x16xf32> {
  %qf = arith.extf %q : tensor<?x2x?x16xbf16> to tensor<?x2x?x16xf32>
  %kf = arith.extf %k : tensor<?x2x?x16xbf16> to tensor<?x2x?x16xf32>
  %vf = arith.extf %v : tensor<?x2x?x16xbf16> to tensor<?x2x?x16xf32>
  %0 = qkv.attention %qf, %kf, %vf : tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32> -> tensor<?x2x?x16xf32>
  return %0 : tensor<?x2x?x16xf32>
}

// -----

// The tensor-core form needs whole MMA tiles and one half type: a head dim of 24 (not a
// multiple of 16), f16 keys with bf16 queries, or f32 values take the SIMT form.
// CHECK-LABEL: func.func @not_mma
// CHECK-NOT: vector.contract
// CHECK-LABEL: func.func @mixed_types
// CHECK-NOT: vector.contract
// CHECK-LABEL: func.func @f32_values
// CHECK-NOT: vector.contract
// CHECK: return
func.func @not_mma(%q: tensor<1x1x?x24xf16>, %k: tensor<1x1x?x24xf16>, %v: tensor<1x1x?x24xf16>) -> tensor<1x1x?x24xf32> {
  %qf = arith.extf %q : tensor<1x1x?x24xf16> to tensor<1x1x?x24xf32>
  %kf = arith.extf %k : tensor<1x1x?x24xf16> to tensor<1x1x?x24xf32>
  %vf = arith.extf %v : tensor<1x1x?x24xf16> to tensor<1x1x?x24xf32>
  %0 = qkv.attention %qf, %kf, %vf : tensor<1x1x?x24xf32>, tensor<1x1x?x24xf32>, tensor<1x1x?x24xf32> -> tensor<1x1x?x24xf32>
  return %0 : tensor<1x1x?x24xf32>
}
func.func @mixed_types(%q: tensor<1x1x?x16xbf16>, %k: tensor<1x1x?x16xf16>, %v: tensor<1x1x?x16xbf16>) -> tensor<1x1x?x16xf32> {
  %qf = arith.extf %q : tensor<1x1x?x16xbf16> to tensor<1x1x?x16xf32>
  %kf = arith.extf %k : tensor<1x1x?x16xf16> to tensor<1x1x?x16xf32>
  %vf = arith.extf %v : tensor<1x1x?x16xbf16> to tensor<1x1x?x16xf32>
  %0 = qkv.attention %qf, %kf, %vf : tensor<1x1x?x16xf32>, tensor<1x1x?x16xf32>, tensor<1x1x?x16xf32> -> tensor<1x1x?x16xf32>
  return %0 : tensor<1x1x?x16xf32>
}
func.func @f32_values(%q: tensor<1x1x?x16xbf16>, %k: tensor<1x1x?x16xbf16>, %v: tensor<1x1x?x16xf32>) -> tensor<1x1x?x16xf32> {
  %qf = arith.extf %q : tensor<1x1x?x16xbf16> to tensor<1x1x?x16xf32>
  %kf = arith.extf %k : tensor<1x1x?x16xbf16> to tensor<1x1x?x16xf32>
  %0 = qkv.attention %qf, %kf, %v : tensor<1x1x?x16xf32>, tensor<1x1x?x16xf32>, tensor<1x1x?x16xf32> -> tensor<1x1x?x16xf32>
  return %0 : tensor<1x1x?x16xf32>
}

// -----

// Head dim 128 in bf16: 64 rows need 78 336 bytes of buffers (f32 max, sum, accumulator
// and scores; bf16 Q, K, V and P); 32 rows (2 warps) take 47 360.
// CHECK-LABEL: func.func @bf16_wide
// CHECK: memref.alloca() {alignment = 64 : i64, qkv.workgroup} : memref<32x128xbf16>
// CHECK: scf.forall (%{{.*}}) in (2) {
// CHECK: } {mapping = [#gpu.warp<x>]}
func.func @bf16_wide(%q: tensor<1x1x?x128xbf16>, %k: tensor<1x1x?x128xbf16>, %v: tensor<1x1x?x128xbf16>) -> tensor<1x1x?x128xf32> {
  %qf = arith.extf %q : tensor<1x1x?x128xbf16> to tensor<1x1x?x128xf32>
  %kf = arith.extf %k : tensor<1x1x?x128xbf16> to tensor<1x1x?x128xf32>
  %vf = arith.extf %v : tensor<1x1x?x128xbf16> to tensor<1x1x?x128xf32>
  %0 = qkv.attention %qf, %kf, %vf : tensor<1x1x?x128xf32>, tensor<1x1x?x128xf32>, tensor<1x1x?x128xf32> -> tensor<1x1x?x128xf32>
  return %0 : tensor<1x1x?x128xf32>
}
