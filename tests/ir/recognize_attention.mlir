// qkv-recognize-attention: the seeds' way of writing attention becomes one op.
// RUN: qkv-opt %s --pass-pipeline='builtin.module(func.func(qkv-recognize-attention))' | FileCheck %s

// matmul -> scale -> score_mod -> mask -> softmax -> matmul, captures from both mods.
// CHECK-LABEL: func.func @full_chain
// CHECK-SAME: (%[[Q:.*]]: tensor<2x?x4xf32>, %[[K:.*]]: tensor<2x?x4xf32>, %[[V:.*]]: tensor<2x?x3xf32>, %[[SL:.*]]: tensor<2xf32>, %[[DOC:.*]]: tensor<?xi32>)
// CHECK-NEXT: %[[A:.*]] = qkv.attention %[[Q]], %[[K]], %[[V]] scale 5.000000e-01 captures(%[[SL]], %[[DOC]] : tensor<2xf32>, tensor<?xi32>)
// CHECK-SAME: -> tensor<2x?x3xf32> score {
// CHECK-NEXT: ^bb0(%{{.*}}: f32, %{{.*}}: index, %[[H:.*]]: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %[[CS:.*]]: tensor<2xf32>, %{{.*}}: tensor<?xi32>):
// CHECK-NEXT: tensor.extract %[[CS]][%[[H]]]
// CHECK: } mask {
// CHECK-NEXT: ^bb0(%{{.*}}: index, %{{.*}}: index, %[[QI:.*]]: index, %[[KI:.*]]: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: tensor<2xf32>, %[[CD:.*]]: tensor<?xi32>):
// CHECK-NEXT: tensor.extract %[[CD]][%[[QI]]]
// CHECK: qkv.yield %{{.*}} : i1
// CHECK-NEXT: }
// CHECK-NEXT: return %[[A]]
// CHECK-NOT: qkv.softmax
func.func @full_chain(%q: tensor<2x?x4xf32>, %k: tensor<2x?x4xf32>, %v: tensor<2x?x3xf32>,
                      %slopes: tensor<2xf32>, %doc: tensor<?xi32>) -> tensor<2x?x3xf32> {
  %kt = qkv.transpose %k axes(1, 2) : tensor<2x?x4xf32> -> tensor<2x4x?xf32>
  %s = qkv.matmul %q, %kt : (tensor<2x?x4xf32>, tensor<2x4x?xf32>) -> tensor<2x?x?xf32>
  %sc = qkv.scale %s by 0.5 : tensor<2x?x?xf32> -> tensor<2x?x?xf32>
  %sm = qkv.score_mod %sc captures(%slopes : tensor<2xf32>) : tensor<2x?x?xf32> -> tensor<2x?x?xf32> {
  ^bb0(%x: f32, %b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index, %sl: tensor<2xf32>):
    %e = tensor.extract %sl[%h] : tensor<2xf32>
    %y = arith.addf %x, %e : f32
    qkv.yield %y : f32
  }
  %m = qkv.mask %sm captures(%doc : tensor<?xi32>) : tensor<2x?x?xf32> -> tensor<2x?x?xf32> {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index, %d: tensor<?xi32>):
    %dq = tensor.extract %d[%qi] : tensor<?xi32>
    %dk = tensor.extract %d[%ki] : tensor<?xi32>
    %c = arith.cmpi eq, %dq, %dk : i32
    qkv.yield %c : i1
  }
  %p = qkv.softmax %m axis 2 : tensor<2x?x?xf32> -> tensor<2x?x?xf32>
  %o = qkv.matmul %p, %v : (tensor<2x?x?xf32>, tensor<2x?x3xf32>) -> tensor<2x?x3xf32>
  return %o : tensor<2x?x3xf32>
}

// The plain seed form without a scale: an explicit scale of 1.
// CHECK-LABEL: func.func @no_scale
// CHECK: qkv.attention %{{.*}}, %{{.*}}, %{{.*}} scale 1.000000e+00 : tensor<?x6xf32>
func.func @no_scale(%q: tensor<?x6xf32>, %k: tensor<?x6xf32>, %v: tensor<?x6xf32>) -> tensor<?x6xf32> {
  %kt = qkv.transpose %k axes(0, 1) : tensor<?x6xf32> -> tensor<6x?xf32>
  %s = qkv.matmul %q, %kt : (tensor<?x6xf32>, tensor<6x?xf32>) -> tensor<?x?xf32>
  %p = qkv.softmax %s axis 1 : tensor<?x?xf32> -> tensor<?x?xf32>
  %o = qkv.matmul %p, %v : (tensor<?x?xf32>, tensor<?x6xf32>) -> tensor<?x6xf32>
  return %o : tensor<?x6xf32>
}

// Softmax over the wrong axis is not attention.
// CHECK-LABEL: func.func @wrong_axis
// CHECK-NOT: qkv.attention
// CHECK: qkv.softmax %{{.*}} axis 0
// CHECK-NOT: qkv.attention
func.func @wrong_axis(%q: tensor<?x6xf32>, %k: tensor<?x6xf32>, %v: tensor<?x6xf32>) -> tensor<?x6xf32> {
  %kt = qkv.transpose %k axes(0, 1) : tensor<?x6xf32> -> tensor<6x?xf32>
  %s = qkv.matmul %q, %kt : (tensor<?x6xf32>, tensor<6x?xf32>) -> tensor<?x?xf32>
  %p = qkv.softmax %s axis 0 : tensor<?x?xf32> -> tensor<?x?xf32>
  %o = qkv.matmul %p, %v : (tensor<?x?xf32>, tensor<?x6xf32>) -> tensor<?x6xf32>
  return %o : tensor<?x6xf32>
}

// The mask before the score_mod is not the attention order: left alone.
// CHECK-LABEL: func.func @mask_then_score_mod
// CHECK-NOT: qkv.attention
func.func @mask_then_score_mod(%q: tensor<?x6xf32>, %k: tensor<?x6xf32>, %v: tensor<?x6xf32>) -> tensor<?x6xf32> {
  %kt = qkv.transpose %k axes(0, 1) : tensor<?x6xf32> -> tensor<6x?xf32>
  %s = qkv.matmul %q, %kt : (tensor<?x6xf32>, tensor<6x?xf32>) -> tensor<?x?xf32>
  %m = qkv.mask %s : tensor<?x?xf32> -> tensor<?x?xf32> {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index):
    %c = arith.cmpi sge, %qi, %ki : index
    qkv.yield %c : i1
  }
  %sm = qkv.score_mod %m : tensor<?x?xf32> -> tensor<?x?xf32> {
  ^bb0(%x: f32, %b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index):
    %c1 = arith.constant 1.0 : f32
    %y = arith.addf %x, %c1 : f32
    qkv.yield %y : f32
  }
  %p = qkv.softmax %sm axis 1 : tensor<?x?xf32> -> tensor<?x?xf32>
  %o = qkv.matmul %p, %v : (tensor<?x?xf32>, tensor<?x6xf32>) -> tensor<?x6xf32>
  return %o : tensor<?x6xf32>
}

// The probabilities are used twice: fusing would compute them twice, so no fusion.
// CHECK-LABEL: func.func @shared_probabilities
// CHECK-NOT: qkv.attention
func.func @shared_probabilities(%q: tensor<?x6xf32>, %k: tensor<?x6xf32>, %v: tensor<?x6xf32>) -> (tensor<?x6xf32>, tensor<?x?xf32>) {
  %kt = qkv.transpose %k axes(0, 1) : tensor<?x6xf32> -> tensor<6x?xf32>
  %s = qkv.matmul %q, %kt : (tensor<?x6xf32>, tensor<6x?xf32>) -> tensor<?x?xf32>
  %p = qkv.softmax %s axis 1 : tensor<?x?xf32> -> tensor<?x?xf32>
  %o = qkv.matmul %p, %v : (tensor<?x?xf32>, tensor<?x6xf32>) -> tensor<?x6xf32>
  return %o, %p : tensor<?x6xf32>, tensor<?x?xf32>
}
