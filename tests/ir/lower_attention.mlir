// qkv-lower-attention-to-loops: one pass over K/V per query row with an online softmax;
// the mods are inlined in the innermost loop and no L x S tensor exists.
// RUN: qkv-opt %s --pass-pipeline="builtin.module(func.func(qkv-lower-attention-to-loops))" | FileCheck %s
// RUN: qkv-opt %s --pass-pipeline="builtin.module(func.func(qkv-lower-attention-to-loops))" | FileCheck %s --check-prefix=NOATT

// No attention op (or its yields) is left anywhere in the output.
// NOATT-NOT: qkv.

// GQA (2 query heads on 1 kv head), an ALiBi-like score_mod and a causal mask.
// CHECK-LABEL: func.func @att
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<2x?x4xf32>, %[[K:[a-z0-9]+]]: tensor<1x?x4xf32>, %[[V:[a-z0-9]+]]: tensor<1x?x3xf32>, %[[SL:[a-z0-9]+]]: tensor<2xf32>
// CHECK-NOT: qkv.attention
// default scale 1/sqrt(Dh)
// CHECK: %[[SQ:.*]] = math.sqrt
// CHECK: %[[SCALE:.*]] = arith.divf %{{.*}}, %[[SQ]]
// CHECK: %[[QM:.*]] = bufferization.to_buffer %[[Q]] read_only
// CHECK: %[[KM:.*]] = bufferization.to_buffer %[[K]] read_only
// CHECK: %[[VM:.*]] = bufferization.to_buffer %[[V]] read_only
// CHECK: %[[OUT:.*]] = memref.alloc(%{{.*}}) : memref<2x?x3xf32>
// CHECK: %[[ACC:.*]] = memref.alloc() : memref<3xf32>
// CHECK: scf.for %[[B:.*]] = 
// CHECK: scf.for %[[H:.*]] = 
// query head h reads kv head h / (Hq / Hkv)
// CHECK: %[[HK:.*]] = arith.divui %[[H]], %{{.*}}
// CHECK: scf.for %[[I:.*]] = 
// the running max starts at -inf, the running sum at 0
// CHECK: scf.for %[[J:.*]] = {{.*}} iter_args(%[[M:.*]] = %cst, %[[L:.*]] = %cst_0) -> (f32, f32)
// CHECK: memref.load %[[QM]][%[[H]], %[[I]], %{{.*}}]
// CHECK: memref.load %[[KM]][%[[HK]], %[[J]], %{{.*}}]
// CHECK: %[[S0:.*]] = arith.mulf %{{.*}}, %[[SCALE]]
// the score_mod, inlined: the capture is read at the query head
// CHECK: %[[SLOPE:.*]] = tensor.extract %[[SL]][%[[H]]]
// CHECK: %[[S:.*]] = arith.addf %[[S0]], %[[SLOPE]]
// CHECK: %[[FINITE:.*]] = arith.cmpf ogt, %[[S]], %cst
// the mask, inlined
// CHECK: %[[CAUSAL:.*]] = arith.cmpi sge, %[[I]], %[[J]]
// CHECK: %[[KEEP:.*]] = arith.andi %[[FINITE]], %[[CAUSAL]]
// CHECK: scf.if %[[KEEP]] -> (f32, f32)
// CHECK: %[[MN:.*]] = arith.maximumf %[[M]], %[[S]]
// CHECK: %[[D:.*]] = arith.subf %[[M]], %[[MN]]
// CHECK: %[[CORR:.*]] = math.exp %[[D]]
// CHECK: %[[SD:.*]] = arith.subf %[[S]], %[[MN]]
// CHECK: %[[P:.*]] = math.exp %[[SD]]
// CHECK: memref.load %[[VM]][%[[HK]], %[[J]], %{{.*}}]
// CHECK: memref.store %{{.*}}, %[[ACC]]
// a fully masked row (l == 0) writes 0
// CHECK: %[[ANY:.*]] = arith.cmpf ogt
// CHECK: arith.select %[[ANY]]
// CHECK: memref.store %{{.*}}, %[[OUT]][%[[H]], %[[I]], %{{.*}}]
// CHECK: bufferization.to_tensor %[[OUT]] restrict writable
func.func @att(%q: tensor<2x?x4xf32>, %k: tensor<1x?x4xf32>, %v: tensor<1x?x3xf32>, %slopes: tensor<2xf32>) -> tensor<2x?x3xf32> {
  %a = qkv.attention %q, %k, %v captures(%slopes : tensor<2xf32>) : tensor<2x?x4xf32>, tensor<1x?x4xf32>, tensor<1x?x3xf32> -> tensor<2x?x3xf32>
    score {
    ^bb0(%x: f32, %b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index, %sl: tensor<2xf32>):
      %e = tensor.extract %sl[%h] : tensor<2xf32>
      %y = arith.addf %x, %e : f32
      qkv.yield %y : f32
    } mask {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index, %sl: tensor<2xf32>):
      %c = arith.cmpi sge, %qi, %ki : index
      qkv.yield %c : i1
    }
  return %a : tensor<2x?x3xf32>
}
