// An attention's log-sum-exp (its second result, `lse`) from the fused kernels, and the
// merge of two partial attentions: what ring attention and split-KV runs are made of.
// RUN: qkv-opt %s --pass-pipeline="builtin.module(qkv-lower-attention-to-flash{vector-bits=512 q-tile=16 kv-tile=16},canonicalize,cse)" | FileCheck %s
// RUN: qkv-opt %s --pass-pipeline="builtin.module(func.func(qkv-lower-to-linalg))" | FileCheck %s --check-prefix=MERGE

// The merge's maps: the outputs' elements, and their rows for the log-sum-exps.
// MERGE-DAG: #[[ALL:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// MERGE-DAG: #[[ROWS:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>

// The tiled kernel writes each query tile's log-sum-exp beside its output: (m + log2 l)
// ln 2 from the running max m (log2 units) and sum l, the tile's rows at once.
// CHECK-LABEL: func.func @tiled_lse
// CHECK-DAG: %[[LN2:.*]] = arith.constant dense<0.693147182> : vector<16xf32>
// CHECK: %[[OUT:.*]] = memref.alloc() : memref<2x33x8xf32>
// CHECK: %[[LSE:.*]] = memref.alloc() : memref<2x33xf32>
// CHECK: scf.parallel
// CHECK: vector.scatter %[[OUT]]
// CHECK: %[[M:.*]] = vector.load %{{.*}}[%c0] : memref<16xf32>, vector<16xf32>
// CHECK: %[[LOG:.*]] = math.log2 %[[L:.*]] : vector<16xf32>
// CHECK: %[[SUM:.*]] = arith.addf %[[M]], %[[LOG]] : vector<16xf32>
// CHECK: %[[NAT:.*]] = arith.mulf %[[SUM]], %[[LN2]] : vector<16xf32>
// CHECK: vector.maskedstore %[[LSE]][%{{.*}}, %{{.*}}], %{{.*}}, %[[NAT]] : memref<2x33xf32>, vector<16xi1>, vector<16xf32>
// CHECK: %[[O:.*]] = bufferization.to_tensor %[[OUT]]
// CHECK: %[[LT:.*]] = bufferization.to_tensor %[[LSE]]
// CHECK: return %[[O]], %[[LT]]
// CHECK-NOT: qkv.attention
func.func @tiled_lse(%q: tensor<2x33x8xf32>, %k: tensor<2x40x8xf32>, %v: tensor<2x40x8xf32>) -> (tensor<2x33x8xf32>, tensor<2x33xf32>) {
  %o, %l = qkv.attention %q, %k, %v : tensor<2x33x8xf32>, tensor<2x40x8xf32>, tensor<2x40x8xf32> -> tensor<2x33x8xf32> lse tensor<2x33xf32>
  return %o, %l : tensor<2x33x8xf32>, tensor<2x33xf32>
}

// The split-KV decode kernel: the merge of the splits gives the row's log-sum-exp too,
// from the largest split max and the rescaled total.
// CHECK-LABEL: func.func @decode_lse
// CHECK: %[[LSE:.*]] = memref.alloc() : memref<1x4x1xf32>
// CHECK: scf.parallel
// CHECK: %[[LOG:.*]] = math.log2 %{{.*}} : f32
// CHECK: %[[SUM:.*]] = arith.addf %{{.*}}, %[[LOG]] : f32
// CHECK: %[[NAT:.*]] = arith.mulf %[[SUM]], %{{.*}} : f32
// CHECK: memref.store %[[NAT]], %[[LSE]][%c0, %{{.*}}, %c0] : memref<1x4x1xf32>
// CHECK: %[[LT:.*]] = bufferization.to_tensor %[[LSE]]
// CHECK: return %[[LT]]
func.func @decode_lse(%q: tensor<1x4x1x8xf32>, %k: tensor<1x2x?x8xf32>, %v: tensor<1x2x?x8xf32>) -> tensor<1x4x1xf32> {
  %o, %l = qkv.attention %q, %k, %v : tensor<1x4x1x8xf32>, tensor<1x2x?x8xf32>, tensor<1x2x?x8xf32> -> tensor<1x4x1x8xf32> lse tensor<1x4x1xf32>
  return %l : tensor<1x4x1xf32>
}

// merge_attention weights each partial by e^(lse - max) per row (the log-sum-exps read
// once per row's elements), 0 where both rows were fully masked; merge_lse is max + log of
// the weights' sum.
// MERGE-LABEL: func.func @merge
// MERGE: linalg.generic {indexing_maps = [#[[ALL]], #[[ROWS]], #[[ALL]], #[[ROWS]], #[[ALL]]], iterator_types = ["parallel", "parallel", "parallel"]}
// MERGE: %[[MAX:.*]] = arith.maximumf
// MERGE: %[[NONE:.*]] = arith.cmpf oeq, %[[MAX]], %{{.*}} : f32
// MERGE: %[[M:.*]] = arith.select %[[NONE]], %{{.*}}, %[[MAX]] : f32
// MERGE: %[[WA:.*]] = math.exp
// MERGE: %[[WB:.*]] = math.exp
// MERGE: %[[TOTAL:.*]] = arith.addf %[[WA]], %[[WB]] : f32
// MERGE: %[[ANY:.*]] = arith.cmpf ugt, %[[TOTAL]]
// MERGE: %[[DIV:.*]] = arith.divf %{{.*}}, %[[TOTAL]] : f32
// MERGE: arith.select %[[ANY]], %[[DIV]], %{{.*}} : f32
// MERGE: linalg.generic
// MERGE: %[[LOG:.*]] = math.log %{{.*}} : f32
// MERGE: arith.addf %{{.*}}, %[[LOG]] : f32
// MERGE-NOT: qkv.merge
func.func @merge(%oa: tensor<2x?x8xf32>, %la: tensor<2x?xf32>, %ob: tensor<2x?x8xf32>, %lb: tensor<2x?xf32>) -> (tensor<2x?x8xf32>, tensor<2x?xf32>) {
  %o = qkv.merge_attention %oa, %la, %ob, %lb : tensor<2x?x8xf32>, tensor<2x?xf32>
  %l = qkv.merge_lse %la, %lb : (tensor<2x?xf32>, tensor<2x?xf32>) -> tensor<2x?xf32>
  return %o, %l : tensor<2x?x8xf32>, tensor<2x?xf32>
}
