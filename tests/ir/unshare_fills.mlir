// qkv-unshare-fills: a fill that several ops write into is cloned, with its tensor.empty,
// for each destination use after the first, or for each one when the fill is also read
// (the reader keeps the original); a fill with one writer is left alone.
// RUN: qkv-opt %s --pass-pipeline="builtin.module(func.func(qkv-unshare-fills))" | FileCheck %s

// CHECK-LABEL: func.func @three_writers
// CHECK: %[[E:.*]] = tensor.empty(%{{.*}}) : tensor<?x4xf32>
// CHECK-NEXT: %[[F:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E]] : tensor<?x4xf32>)
// CHECK-NEXT: %[[E0:.*]] = tensor.empty(%{{.*}}) : tensor<?x4xf32>
// CHECK-NEXT: %[[F0:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E0]] : tensor<?x4xf32>)
// CHECK-NEXT: linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<?x4xf32>, tensor<4x4xf32>) outs(%[[F0]] : tensor<?x4xf32>)
// CHECK-NEXT: %[[E1:.*]] = tensor.empty(%{{.*}}) : tensor<?x4xf32>
// CHECK-NEXT: %[[F1:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E1]] : tensor<?x4xf32>)
// CHECK-NEXT: linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<?x4xf32>, tensor<4x4xf32>) outs(%[[F1]] : tensor<?x4xf32>)
// CHECK-NEXT: %[[E2:.*]] = tensor.empty(%{{.*}}) : tensor<?x4xf32>
// CHECK-NEXT: %[[F2:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E2]] : tensor<?x4xf32>)
// CHECK-NEXT: linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<?x4xf32>, tensor<4x4xf32>) outs(%[[F2]] : tensor<?x4xf32>)
// The read keeps the original.
// CHECK-NEXT: tensor.empty
// CHECK-NEXT: linalg.add ins(%[[F]], %{{.*}} : tensor<?x4xf32>, tensor<?x4xf32>)
func.func @three_writers(%x: tensor<?x4xf32>, %w: tensor<4x4xf32>)
    -> (tensor<?x4xf32>, tensor<?x4xf32>, tensor<?x4xf32>, tensor<?x4xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x4xf32>
  %e = tensor.empty(%n) : tensor<?x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x4xf32>) -> tensor<?x4xf32>
  %a = linalg.matmul ins(%x, %w : tensor<?x4xf32>, tensor<4x4xf32>) outs(%f : tensor<?x4xf32>) -> tensor<?x4xf32>
  %b = linalg.matmul ins(%x, %w : tensor<?x4xf32>, tensor<4x4xf32>) outs(%f : tensor<?x4xf32>) -> tensor<?x4xf32>
  %c = linalg.matmul ins(%x, %w : tensor<?x4xf32>, tensor<4x4xf32>) outs(%f : tensor<?x4xf32>) -> tensor<?x4xf32>
  %e2 = tensor.empty(%n) : tensor<?x4xf32>
  %d = linalg.add ins(%f, %a : tensor<?x4xf32>, tensor<?x4xf32>) outs(%e2 : tensor<?x4xf32>) -> tensor<?x4xf32>
  return %a, %b, %c, %d : tensor<?x4xf32>, tensor<?x4xf32>, tensor<?x4xf32>, tensor<?x4xf32>
}

// CHECK-LABEL: func.func @one_writer
// CHECK: linalg.fill
// CHECK-NOT: linalg.fill
func.func @one_writer(%x: tensor<?x4xf32>, %w: tensor<4x4xf32>) -> tensor<?x4xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x4xf32>
  %e = tensor.empty(%n) : tensor<?x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x4xf32>) -> tensor<?x4xf32>
  %a = linalg.matmul ins(%x, %w : tensor<?x4xf32>, tensor<4x4xf32>) outs(%f : tensor<?x4xf32>) -> tensor<?x4xf32>
  return %a : tensor<?x4xf32>
}

// A matmul's start that is not a fill (a linear's bias broadcast into a tensor.empty that
// CSE shared with another op) gets an empty of its own: bufferization then gives each
// matmul's C a buffer of its own instead of reusing the first's once it died.
// CHECK-LABEL: func.func @bias_starts
// CHECK: %[[E:.*]] = tensor.empty(%{{.*}}) : tensor<?x4xf32>
// CHECK: %[[E1:.*]] = tensor.empty(%{{.*}}) : tensor<?x4xf32>
// CHECK-NEXT: %[[B1:.*]] = linalg.generic {{.*}} ins(%{{.*}} : tensor<4xbf16>) outs(%[[E1]] : tensor<?x4xf32>)
// CHECK: linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<?x4xbf16>, tensor<4x4xbf16>) outs(%[[B1]] : tensor<?x4xf32>)
// CHECK: %[[E2:.*]] = tensor.empty(%{{.*}}) : tensor<?x4xf32>
// CHECK-NEXT: %[[B2:.*]] = linalg.generic {{.*}} ins(%{{.*}} : tensor<4xbf16>) outs(%[[E2]] : tensor<?x4xf32>)
// CHECK: linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<?x4xbf16>, tensor<4x4xbf16>) outs(%[[B2]] : tensor<?x4xf32>)
// The other user keeps the original.
// CHECK: linalg.add ins(%{{.*}}, %{{.*}} : tensor<?x4xf32>, tensor<?x4xf32>) outs(%[[E]] : tensor<?x4xf32>)
#bias = affine_map<(i, j) -> (j)>
#all = affine_map<(i, j) -> (i, j)>
func.func @bias_starts(%x: tensor<?x4xbf16>, %w: tensor<4x4xbf16>, %b: tensor<4xbf16>)
    -> (tensor<?x4xf32>, tensor<?x4xf32>) {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?x4xbf16>
  %e = tensor.empty(%n) : tensor<?x4xf32>
  %s1 = linalg.generic {indexing_maps = [#bias, #all], iterator_types = ["parallel", "parallel"]}
      ins(%b : tensor<4xbf16>) outs(%e : tensor<?x4xf32>) {
  ^bb0(%v: bf16, %o: f32):
    %y = arith.extf %v : bf16 to f32
    linalg.yield %y : f32
  } -> tensor<?x4xf32>
  %p1 = linalg.matmul ins(%x, %w : tensor<?x4xbf16>, tensor<4x4xbf16>) outs(%s1 : tensor<?x4xf32>) -> tensor<?x4xf32>
  %s2 = linalg.generic {indexing_maps = [#bias, #all], iterator_types = ["parallel", "parallel"]}
      ins(%b : tensor<4xbf16>) outs(%e : tensor<?x4xf32>) {
  ^bb0(%v: bf16, %o: f32):
    %y = arith.extf %v : bf16 to f32
    linalg.yield %y : f32
  } -> tensor<?x4xf32>
  %p2 = linalg.matmul ins(%x, %w : tensor<?x4xbf16>, tensor<4x4xbf16>) outs(%s2 : tensor<?x4xf32>) -> tensor<?x4xf32>
  %sum = linalg.add ins(%p1, %p2 : tensor<?x4xf32>, tensor<?x4xf32>) outs(%e : tensor<?x4xf32>) -> tensor<?x4xf32>
  return %sum, %p2 : tensor<?x4xf32>, tensor<?x4xf32>
}
