// qkv-lower-to-linalg: qkv ops become linalg on tensors; positions come from linalg.index.
// RUN: qkv-opt %s --pass-pipeline="builtin.module(func.func(qkv-lower-to-linalg))" | FileCheck %s

// CHECK-DAG: #[[A:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
// CHECK-DAG: #[[B:.*]] = affine_map<(d0, d1, d2, d3) -> (d3, d2)>
// CHECK-DAG: #[[O:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>

// Softmax: max, then sum of exp(x - max'), then normalise; max' = 0 for an all -inf row
// and a zero sum gives 0, so a fully masked row is 0, not NaN.
// CHECK-LABEL: func.func @softmax
// CHECK-NOT: qkv.
// CHECK: linalg.fill ins(%[[NINF:.*]] : f32)
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
// CHECK: arith.maximumf
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]
// CHECK: arith.cmpf oeq, %{{.*}}, %[[NINF]]
// CHECK: math.exp
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]
// CHECK: %[[POS:.*]] = arith.cmpf ogt
// CHECK: arith.select %[[POS]]
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
