// qkv-group-sibling-matmuls: a later matmul of the same A moves up to right after the
// group's last member, with the side-effect-free ops it needs, so that
// qkv-lower-matmul-to-microkernels runs them as one GEMM; one that depends on a member,
// of another A, or whose move would part a member from the elementwise op right after it
// (its epilogue) stays.
// RUN: qkv-opt %s --pass-pipeline="builtin.module(func.func(qkv-group-sibling-matmuls))" | FileCheck %s

// Q's "RoPE" (a transpose here) between Q's and K's projections: K's moves up, with its
// tensor.empty and fill, and V's (whose bias broadcast comes along) after it.
// CHECK-LABEL: func.func @qkv
// CHECK: %[[Q:.*]] = linalg.matmul ins(%[[X:[a-z0-9]+]], %{{.*}}
// CHECK-NEXT: tensor.empty
// CHECK-NEXT: linalg.fill
// CHECK-NEXT: %[[K:.*]] = linalg.matmul ins(%[[X]], %{{.*}}
// CHECK-NEXT: tensor.empty
// CHECK-NEXT: linalg.generic
// CHECK: %[[V:.*]] = linalg.matmul ins(%[[X]], %{{.*}}
// CHECK-NEXT: tensor.empty
// CHECK-NEXT: linalg.transpose ins(%[[Q]]
func.func @qkv(%x: tensor<?x8xf32>, %wq: tensor<8x8xf32>, %wk: tensor<8x8xf32>, %wv: tensor<8x8xf32>,
               %bv: tensor<8xf32>) -> (tensor<8x?xf32>, tensor<?x8xf32>, tensor<?x8xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x8xf32>
  %e = tensor.empty(%n) : tensor<?x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x8xf32>) -> tensor<?x8xf32>
  %q = linalg.matmul ins(%x, %wq : tensor<?x8xf32>, tensor<8x8xf32>) outs(%f : tensor<?x8xf32>) -> tensor<?x8xf32>
  %et = tensor.empty(%n) : tensor<8x?xf32>
  %qt = linalg.transpose ins(%q : tensor<?x8xf32>) outs(%et : tensor<8x?xf32>) permutation = [1, 0]
  %ek = tensor.empty(%n) : tensor<?x8xf32>
  %fk = linalg.fill ins(%zero : f32) outs(%ek : tensor<?x8xf32>) -> tensor<?x8xf32>
  %k = linalg.matmul ins(%x, %wk : tensor<?x8xf32>, tensor<8x8xf32>) outs(%fk : tensor<?x8xf32>) -> tensor<?x8xf32>
  %ev = tensor.empty(%n) : tensor<?x8xf32>
  %bias = linalg.generic {indexing_maps = [affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%bv : tensor<8xf32>) outs(%ev : tensor<?x8xf32>) {
  ^bb0(%b: f32, %o: f32):
    linalg.yield %b : f32
  } -> tensor<?x8xf32>
  %v = linalg.matmul ins(%x, %wv : tensor<?x8xf32>, tensor<8x8xf32>) outs(%bias : tensor<?x8xf32>) -> tensor<?x8xf32>
  return %qt, %k, %v : tensor<8x?xf32>, tensor<?x8xf32>, tensor<?x8xf32>
}

// The first product's GELU-like epilogue (an elementwise generic reading it) stays right
// after it: the second product does not move in between.
// CHECK-LABEL: func.func @epilogue_first
// CHECK: %[[P:.*]] = linalg.matmul
// CHECK-NEXT: linalg.generic {{.*}} ins(%[[P]]
// CHECK: linalg.matmul
func.func @epilogue_first(%x: tensor<?x8xf32>, %w0: tensor<8x8xf32>, %w1: tensor<8x8xf32>, %init: tensor<?x8xf32>)
    -> (tensor<?x8xf32>, tensor<?x8xf32>) {
  %p = linalg.matmul ins(%x, %w0 : tensor<?x8xf32>, tensor<8x8xf32>) outs(%init : tensor<?x8xf32>) -> tensor<?x8xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%p : tensor<?x8xf32>) outs(%init : tensor<?x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %t = math.tanh %a : f32
    linalg.yield %t : f32
  } -> tensor<?x8xf32>
  %r = linalg.matmul ins(%x, %w1 : tensor<?x8xf32>, tensor<8x8xf32>) outs(%init : tensor<?x8xf32>) -> tensor<?x8xf32>
  return %g, %r : tensor<?x8xf32>, tensor<?x8xf32>
}

// A product whose B is a member's result, and one of another A, stay where they are.
// CHECK-LABEL: func.func @dependent
// CHECK: %[[P:.*]] = linalg.matmul ins(%[[X:[a-z0-9]+]], %{{.*}}
// CHECK-NEXT: linalg.transpose
// CHECK-NEXT: linalg.matmul ins(%[[X]], %[[P]]
// CHECK-NEXT: linalg.matmul ins(%{{[a-z0-9]+}}, %{{.*}}
func.func @dependent(%x: tensor<8x8xf32>, %y: tensor<8x8xf32>, %w: tensor<8x8xf32>, %init: tensor<8x8xf32>)
    -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) {
  %p = linalg.matmul ins(%x, %w : tensor<8x8xf32>, tensor<8x8xf32>) outs(%init : tensor<8x8xf32>) -> tensor<8x8xf32>
  %t = linalg.transpose ins(%p : tensor<8x8xf32>) outs(%init : tensor<8x8xf32>) permutation = [1, 0]
  %r = linalg.matmul ins(%x, %p : tensor<8x8xf32>, tensor<8x8xf32>) outs(%init : tensor<8x8xf32>) -> tensor<8x8xf32>
  %s = linalg.matmul ins(%y, %w : tensor<8x8xf32>, tensor<8x8xf32>) outs(%init : tensor<8x8xf32>) -> tensor<8x8xf32>
  return %t, %r, %s : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>
}
