// qkv-lower-to-linalg: qkv ops become linalg on tensors; positions come from linalg.index.
// RUN: qkv-opt %s --pass-pipeline="builtin.module(func.func(qkv-lower-to-linalg))" | FileCheck %s
// RUN: qkv-opt %s --pass-pipeline="builtin.module(func.func(qkv-lower-to-linalg))" | FileCheck %s --check-prefix=NOQKV

// No qkv op is left anywhere in the output.
// NOQKV-NOT: qkv.

// CHECK-DAG: #[[A:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
// CHECK-DAG: #[[B:.*]] = affine_map<(d0, d1, d2, d3) -> (d3, d2)>
// CHECK-DAG: #[[O:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>

// Softmax: max, then sum of exp(x - max'), then normalise; max' = 0 for an all -inf row
// and a zero sum gives 0, so a fully masked row is 0, not NaN. Each exp takes x minus
// the (safe) max: without the subtraction, exp overflows for scores past 88.
// CHECK-LABEL: func.func @softmax
// CHECK-SAME: (%[[X:arg0]]: tensor<?x5xf32>)
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG: %[[NINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK: %[[INIT:.*]] = linalg.fill ins(%[[NINF]] : f32)
// CHECK: %[[MAX:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[X]] : tensor<?x5xf32>) outs(%[[INIT]] : tensor<?xf32>)
// CHECK-NEXT: ^bb0(%[[A0:[a-z0-9_]+]]: f32, %[[M0:[a-z0-9_]+]]: f32):
// CHECK-NEXT: %[[MX:.*]] = arith.maximumf %[[A0]], %[[M0]] : f32
// CHECK-NEXT: linalg.yield %[[MX]] : f32
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[X]], %[[MAX]] : tensor<?x5xf32>, tensor<?xf32>)
// CHECK-NEXT: ^bb0(%[[A1:[a-z0-9_]+]]: f32, %[[M1:[a-z0-9_]+]]: f32, %[[L1:[a-z0-9_]+]]: f32):
// CHECK-NEXT: %[[ISINF1:.*]] = arith.cmpf oeq, %[[M1]], %[[NINF]] : f32
// CHECK-NEXT: %[[SAFE1:.*]] = arith.select %[[ISINF1]], %[[ZERO]], %[[M1]] : f32
// CHECK-NEXT: %[[D1:.*]] = arith.subf %[[A1]], %[[SAFE1]] : f32
// CHECK-NEXT: %[[E1:.*]] = math.exp %[[D1]] : f32
// CHECK-NEXT: %[[S1:.*]] = arith.addf %[[L1]], %[[E1]] : f32
// CHECK-NEXT: linalg.yield %[[S1]] : f32
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]} ins(%[[X]], %[[MAX]], %[[SUM]] : tensor<?x5xf32>, tensor<?xf32>, tensor<?xf32>)
// CHECK-NEXT: ^bb0(%[[A2:[a-z0-9_]+]]: f32, %[[M2:[a-z0-9_]+]]: f32, %[[L2:[a-z0-9_]+]]: f32, %{{.*}}: f32):
// CHECK-NEXT: %[[ISINF2:.*]] = arith.cmpf oeq, %[[M2]], %[[NINF]] : f32
// CHECK-NEXT: %[[SAFE2:.*]] = arith.select %[[ISINF2]], %[[ZERO]], %[[M2]] : f32
// CHECK-NEXT: %[[D2:.*]] = arith.subf %[[A2]], %[[SAFE2]] : f32
// CHECK-NEXT: %[[E2:.*]] = math.exp %[[D2]] : f32
// CHECK-NEXT: %[[POS:.*]] = arith.cmpf ogt, %[[L2]], %[[ZERO]] : f32
// CHECK-NEXT: %[[Q:.*]] = arith.divf %[[E2]], %[[L2]] : f32
// CHECK-NEXT: %[[R:.*]] = arith.select %[[POS]], %[[Q]], %[[ZERO]] : f32
// CHECK-NEXT: linalg.yield %[[R]] : f32
func.func @softmax(%x: tensor<?x5xf32>) -> tensor<?x5xf32> {
  %0 = qkv.softmax %x axis 1 : tensor<?x5xf32> -> tensor<?x5xf32>
  return %0 : tensor<?x5xf32>
}

// split_heads is the seeds' reshape + transpose.
// CHECK-LABEL: func.func @split
// CHECK: tensor.expand_shape %{{.*}} {{\[}}[0], [1], [2, 3]] output_shape [%{{.*}}, %{{.*}}, 2, 3] : tensor<?x?x6xf32> into tensor<?x?x2x3xf32>
// CHECK: linalg.transpose {{.*}} permutation = [0, 2, 1, 3]
func.func @split(%x: tensor<?x?x6xf32>) -> tensor<?x2x?x3xf32> {
  %0 = qkv.split_heads %x heads 2 : tensor<?x?x6xf32> -> tensor<?x2x?x3xf32>
  return %0 : tensor<?x2x?x3xf32>
}

// CHECK-LABEL: func.func @merge
// CHECK: linalg.transpose {{.*}} permutation = [1, 0, 2]
// CHECK: tensor.collapse_shape %{{.*}} {{\[}}[0], [1, 2]] : tensor<?x2x3xf32> into tensor<?x6xf32>
func.func @merge(%x: tensor<2x?x3xf32>) -> tensor<?x6xf32> {
  %0 = qkv.merge_heads %x : tensor<2x?x3xf32> -> tensor<?x6xf32>
  return %0 : tensor<?x6xf32>
}

// A mask is an elementwise select against -inf; q and kv are the last two loop indices.
// CHECK-LABEL: func.func @mask
// CHECK: linalg.generic
// CHECK: %[[QI:.*]] = linalg.index 1 : index
// CHECK: %[[KI:.*]] = linalg.index 2 : index
// CHECK: %[[C:.*]] = arith.cmpi sge, %[[QI]], %[[KI]] : index
// CHECK: arith.select %[[C]], %{{.*}}, %cst : f32
func.func @mask(%s: tensor<2x?x?xf32>) -> tensor<2x?x?xf32> {
  %0 = qkv.mask %s : tensor<2x?x?xf32> -> tensor<2x?x?xf32> {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index):
    %c = arith.cmpi sge, %qi, %ki : index
    qkv.yield %c : i1
  }
  return %0 : tensor<2x?x?xf32>
}

// linear with bias: the output starts as the broadcast bias, then linalg.matmul
// accumulates x . w into it.
// CHECK-LABEL: func.func @linear
// CHECK: %[[INIT:.*]] = linalg.generic {{.*}} ins(%arg2 : tensor<3xf32>)
// CHECK: linalg.matmul ins(%arg0, %arg1 : tensor<?x4xf32>, tensor<4x3xf32>) outs(%[[INIT]] : tensor<?x3xf32>)
func.func @linear(%x: tensor<?x4xf32>, %w: tensor<4x3xf32>, %b: tensor<3xf32>) -> tensor<?x3xf32> {
  %0 = qkv.linear %x, %w bias %b : tensor<?x4xf32>, tensor<4x3xf32>, tensor<3xf32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

// RoPE reads each feature's partner (i +- Dh/2) and rotates in f64 angles.
// CHECK-LABEL: func.func @rope
// CHECK: %[[ROW:.*]] = linalg.index 0 : index
// CHECK: %[[D:.*]] = linalg.index 1 : index
// CHECK: %[[FIRST:.*]] = arith.cmpi ult, %[[D]], %[[HALF:.*]] : index
// CHECK: arith.select %[[FIRST]]
// CHECK: %[[PARTNER:.*]] = arith.select %[[FIRST]]
// CHECK: math.cos %{{.*}} : f64
// CHECK: math.sin %{{.*}} : f64
// CHECK: tensor.extract %arg0[%[[ROW]], %[[PARTNER]]]
// CHECK: arith.select %[[FIRST]]
func.func @rope(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %0 = qkv.rope %x base 10000.0 offset 0 : tensor<?x4xf32> -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// Embedding gathers table rows by id inside a generic over the output.
// CHECK-LABEL: func.func @embedding
// CHECK: linalg.generic {{.*}} ins(%arg0 : tensor<?xi32>)
// CHECK: %[[ROW:.*]] = arith.index_cast %{{.*}} : i32 to index
// CHECK: %[[COL:.*]] = linalg.index 1 : index
// CHECK: tensor.extract %arg1[%[[ROW]], %[[COL]]] : tensor<10x6xf32>
func.func @embedding(%ids: tensor<?xi32>, %table: tensor<10x6xf32>) -> tensor<?x6xf32> {
  %0 = qkv.embedding %table[%ids] : (tensor<?xi32>, tensor<10x6xf32>) -> tensor<?x6xf32>
  return %0 : tensor<?x6xf32>
}

// Batched matmul with a broadcast 2-D rhs: linalg.batch_matmul whose rhs map drops the
// batch loop (maps A, B, O are checked at the top: MLIR prints them before the module).
// CHECK-LABEL: func.func @matmul_broadcast
// CHECK: %[[ZERO:.*]] = linalg.fill
// CHECK: linalg.batch_matmul indexing_maps = [#[[A]], #[[B]], #[[O]]] ins(%arg0, %arg1 : tensor<?x?x4xf32>, tensor<4x3xf32>) outs(%[[ZERO]] : tensor<?x?x3xf32>)
func.func @matmul_broadcast(%a: tensor<?x?x4xf32>, %b: tensor<4x3xf32>) -> tensor<?x?x3xf32> {
  %0 = qkv.matmul %a, %b : (tensor<?x?x4xf32>, tensor<4x3xf32>) -> tensor<?x?x3xf32>
  return %0 : tensor<?x?x3xf32>
}

// layer_norm: mean, sum of squared deviations, then (x - mean) / sqrt(var + eps) * gamma
// + beta; eps is the op's, rounded to f32.
// CHECK-LABEL: func.func @layer_norm
// CHECK-SAME: (%[[X:arg0]]: tensor<?x5xf32>, %[[G:arg1]]: tensor<5xf32>, %[[B:arg2]]: tensor<5xf32>)
// CHECK-DAG: %[[EPS:.*]] = arith.constant 9.99999974E-6 : f32
// CHECK-DAG: %[[N:.*]] = arith.sitofp %{{.*}} : i64 to f32
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}} ins(%[[X]] : tensor<?x5xf32>)
// CHECK: arith.addf
// CHECK: %[[MEAN:.*]] = linalg.generic {{.*}} ins(%[[SUM]] : tensor<?xf32>)
// CHECK-NEXT: ^bb0(%[[S:[a-z0-9_]+]]: f32, %{{.*}}: f32):
// CHECK-NEXT: arith.divf %[[S]], %[[N]] : f32
// CHECK: %[[SQ:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[MEAN]] : tensor<?x5xf32>, tensor<?xf32>)
// CHECK-NEXT: ^bb0(%[[A:[a-z0-9_]+]]: f32, %[[M:[a-z0-9_]+]]: f32, %[[ACC:[a-z0-9_]+]]: f32):
// CHECK-NEXT: %[[C:.*]] = arith.subf %[[A]], %[[M]] : f32
// CHECK-NEXT: %[[C2:.*]] = arith.mulf %[[C]], %[[C]] : f32
// CHECK-NEXT: arith.addf %[[ACC]], %[[C2]] : f32
// CHECK: linalg.generic {{.*}} ins(%[[X]], %[[SQ]], %[[MEAN]], %[[G]], %[[B]] :
// CHECK-NEXT: ^bb0(%[[XI:[a-z0-9_]+]]: f32, %[[SS:[a-z0-9_]+]]: f32, %[[MI:[a-z0-9_]+]]: f32, %[[GI:[a-z0-9_]+]]: f32, %[[BI:[a-z0-9_]+]]: f32, %{{.*}}: f32):
// CHECK-NEXT: %[[VAR:.*]] = arith.divf %[[SS]], %[[N]] : f32
// CHECK-NEXT: %[[VE:.*]] = arith.addf %[[VAR]], %[[EPS]] : f32
// CHECK-NEXT: %[[DEN:.*]] = math.sqrt %[[VE]] : f32
// CHECK-NEXT: %[[DX:.*]] = arith.subf %[[XI]], %[[MI]] : f32
// CHECK-NEXT: %[[Y:.*]] = arith.divf %[[DX]], %[[DEN]] : f32
// CHECK-NEXT: %[[YG:.*]] = arith.mulf %[[Y]], %[[GI]] : f32
// CHECK-NEXT: %[[YB:.*]] = arith.addf %[[YG]], %[[BI]] : f32
// CHECK-NEXT: linalg.yield %[[YB]] : f32
func.func @layer_norm(%x: tensor<?x5xf32>, %g: tensor<5xf32>, %b: tensor<5xf32>) -> tensor<?x5xf32> {
  %0 = qkv.layer_norm %x gamma %g : tensor<5xf32> beta %b : tensor<5xf32> eps 0.00001 : tensor<?x5xf32> -> tensor<?x5xf32>
  return %0 : tensor<?x5xf32>
}

// rms_norm: x / sqrt(mean(x^2) + eps).
// CHECK-LABEL: func.func @rms_norm
// CHECK-SAME: (%[[X:arg0]]: tensor<?x5xf32>)
// CHECK-DAG: %[[EPS:.*]] = arith.constant 0.00999999977 : f32
// CHECK-DAG: %[[N:.*]] = arith.sitofp %{{.*}} : i64 to f32
// CHECK: %[[SQ:.*]] = linalg.generic {{.*}} ins(%[[X]] : tensor<?x5xf32>)
// CHECK-NEXT: ^bb0(%[[A:[a-z0-9_]+]]: f32, %[[ACC:[a-z0-9_]+]]: f32):
// CHECK-NEXT: %[[A2:.*]] = arith.mulf %[[A]], %[[A]] : f32
// CHECK-NEXT: arith.addf %[[ACC]], %[[A2]] : f32
// CHECK: linalg.generic {{.*}} ins(%[[X]], %[[SQ]] : tensor<?x5xf32>, tensor<?xf32>)
// CHECK-NEXT: ^bb0(%[[XI:[a-z0-9_]+]]: f32, %[[SS:[a-z0-9_]+]]: f32, %{{.*}}: f32):
// CHECK-NEXT: %[[MS:.*]] = arith.divf %[[SS]], %[[N]] : f32
// CHECK-NEXT: %[[ME:.*]] = arith.addf %[[MS]], %[[EPS]] : f32
// CHECK-NEXT: %[[DEN:.*]] = math.sqrt %[[ME]] : f32
// CHECK-NEXT: %[[Y:.*]] = arith.divf %[[XI]], %[[DEN]] : f32
// CHECK-NEXT: linalg.yield %[[Y]] : f32
func.func @rms_norm(%x: tensor<?x5xf32>) -> tensor<?x5xf32> {
  %0 = qkv.rms_norm %x eps 0.01 : tensor<?x5xf32> -> tensor<?x5xf32>
  return %0 : tensor<?x5xf32>
}
