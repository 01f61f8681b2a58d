// qkv-lower-attention-to-flash on the avx512bf16 tier (docs/compiler.md, "ISA tiers"): a
// bf16 attention (q, k, v widened by the import) runs its tiled kernel on bf16 pairs.
// q is gathered where it is, two head dims at a time, and interleaved (unscaled); the
// scores are scaled in f32; the probabilities are rounded to bf16 and interleaved in pairs
// of keys (a zero pairs an odd last key); V is packed in pairs of keys per key tile; both
// products are x86vector.avx512.dot. On the f32 tier the same op runs FMAs: each key
// tile's bf16 rows are widened once into an f32 tile (66 keys x 64 dims), which the score
// kernel broadcasts from; then the value tile's rows into the same buffer, for P.V.
// RUN: qkv-opt %s --pass-pipeline="builtin.module(qkv-lower-attention-to-flash{vector-bits=512 isa=avx512bf16},canonicalize,cse)" | FileCheck %s
// RUN: qkv-opt %s --pass-pipeline="builtin.module(qkv-lower-attention-to-flash{vector-bits=512 isa=f32},canonicalize,cse)" | FileCheck %s --check-prefix=F32
// RUN: not qkv-opt %s --pass-pipeline="builtin.module(qkv-lower-attention-to-flash{isa=sse})" 2>&1 | FileCheck %s --check-prefix=BAD

// The task's buffers: qT (32 pairs of head dims x 64 queries x 2) in bf16, the f32
// scores (66 keys x 64 queries), then pT and vP (33 pairs of keys x 128) in bf16.
// CHECK-LABEL: func.func @pairs
// CHECK: memref.alloca() {alignment = 64 : i64} : memref<32x128xbf16>
// CHECK: memref.alloca() {alignment = 64 : i64} : memref<66x64xf32>
// CHECK: memref.alloca() {alignment = 64 : i64} : memref<33x128xbf16>
// CHECK: memref.alloca() {alignment = 64 : i64} : memref<33x128xbf16>
// q's pairs: two gathers of bf16 columns, interleaved.
// CHECK: %[[D0:.*]] = vector.gather %{{.*}} : memref<1x2x33x64xbf16, {{.*}}>, vector<16xindex>, vector<16xi1>, vector<16xbf16> into vector<16xbf16>
// CHECK: %[[D1:.*]] = vector.gather %{{.*}} : memref<1x2x33x64xbf16, {{.*}}>, vector<16xindex>, vector<16xi1>, vector<16xbf16> into vector<16xbf16>
// CHECK: vector.interleave %[[D0]], %[[D1]] : vector<16xbf16> -> vector<32xbf16>
// Q.K^T: a key row's pair read where it is, broadcast as 32 bits, four dot products.
// CHECK: %[[KP:.*]] = vector.load %{{.*}} : memref<1x2x70x64xbf16, {{.*}}>, vector<2xbf16>
// CHECK: vector.bitcast %[[KP]] : vector<2xbf16> to vector<1xi32>
// CHECK: x86vector.avx512.dot
// The softmax: the raw scores' max, scaled once per query vector; the probabilities
// exp2(s * scale - m) (the scale in an FMA), in pairs of keys, rounded to bf16.
// CHECK: %[[TMAX:.*]] = scf.for %{{.*}} iter_args(%{{.*}} = %[[NINF:.*]]) -> (vector<16xf32>) {
// CHECK: %[[RAW:.*]] = vector.load %{{.*}} : memref<66x64xf32>, vector<16xf32>
// CHECK-NOT: arith.mulf %[[RAW]]
// CHECK: scf.yield
// CHECK: %[[SCALED:.*]] = arith.mulf %[[TMAX]], %[[SCALE:.*]] : vector<16xf32>
// CHECK-NEXT: arith.cmpf ogt, %[[SCALED]]
// CHECK: %[[NEGM:.*]] = arith.negf
// CHECK: %[[S:.*]] = vector.load %{{.*}} : memref<66x64xf32>, vector<16xf32>
// CHECK: math.fma %[[S]], %[[SCALE]], %[[NEGM]] : vector<16xf32>
// CHECK: %[[P0:.*]] = arith.truncf %{{.*}} : vector<16xf32> to vector<16xbf16>
// CHECK: %[[P1:.*]] = arith.truncf %{{.*}} : vector<16xf32> to vector<16xbf16>
// CHECK: vector.interleave %[[P0]], %[[P1]] : vector<16xbf16> -> vector<32xbf16>
// An odd number of keys: the last with a zero.
// CHECK: %[[ODD:.*]] = arith.cmpi ne, %{{.*}}, %c0 : index
// CHECK: scf.if %[[ODD]] -> (vector<16xf32>)
// CHECK: %[[PL:.*]] = arith.truncf %{{.*}} : vector<16xf32> to vector<16xbf16>
// CHECK: vector.interleave %[[PL]], %{{.*}} : vector<16xbf16> -> vector<32xbf16>
// V in pairs of keys: rows 2jp and 2jp + 1 (masked past the tile's keys), interleaved.
// CHECK: %[[V0:.*]] = vector.maskedload %{{.*}} : memref<1x2x70x64xbf16, {{.*}}>, vector<16xi1>, vector<16xbf16> into vector<16xbf16>
// CHECK: %[[V1:.*]] = vector.maskedload %{{.*}} : memref<1x2x70x64xbf16, {{.*}}>, vector<16xi1>, vector<16xbf16> into vector<16xbf16>
// CHECK: vector.interleave %[[V0]], %[[V1]] : vector<16xbf16> -> vector<32xbf16>
// P.V on pairs.
// CHECK: x86vector.avx512.dot
// F32-LABEL: func.func @pairs
// F32-NOT: x86vector
// F32: memref.alloca() {{.*}} : memref<66x64xf32>
// F32: memref.alloca() {{.*}} : memref<64x64xf32>
// F32: %[[W:.*]] = memref.alloca() {{.*}} : memref<66x64xf32>
// F32: %[[KR:.*]] = vector.load %{{.*}} : memref<1x2x70x64xbf16, {{.*}}>, vector<16xbf16>
// F32-NEXT: %[[KW:.*]] = arith.extf %[[KR]] : vector<16xbf16> to vector<16xf32>
// F32-NEXT: vector.store %[[KW]], %[[W]]
// F32-NOT: memref<1x2x70x64xbf16
// F32: memref.load %[[W]]
// F32-NEXT: vector.broadcast
// F32-NEXT: vector.fma
// F32: %[[VR:.*]] = vector.load %{{.*}} : memref<1x2x70x64xbf16, {{.*}}>, vector<16xbf16>
// F32-NEXT: %[[VW:.*]] = arith.extf %[[VR]] : vector<16xbf16> to vector<16xf32>
// F32-NEXT: vector.store %[[VW]], %[[W]]
// F32-NOT: memref<1x2x70x64xbf16
// F32: memref.load %[[W]]
// F32-NEXT: vector.broadcast
// F32-NEXT: vector.fma
// BAD: unknown isa 'sse' (f32, avx512bf16, amx)
func.func @pairs(%q: tensor<1x2x33x64xbf16>, %k: tensor<1x2x70x64xbf16>, %v: tensor<1x2x70x64xbf16>) -> tensor<1x2x33x64xf32> {
  %0 = arith.extf %q : tensor<1x2x33x64xbf16> to tensor<1x2x33x64xf32>
  %1 = arith.extf %k : tensor<1x2x70x64xbf16> to tensor<1x2x70x64xf32>
  %2 = arith.extf %v : tensor<1x2x70x64xbf16> to tensor<1x2x70x64xf32>
  %3 = qkv.attention %0, %1, %2 : tensor<1x2x33x64xf32>, tensor<1x2x70x64xf32>, tensor<1x2x70x64xf32> -> tensor<1x2x33x64xf32>
  return %3 : tensor<1x2x33x64xf32>
}
