// qkv-copy-repeated-results: a value returned more than once (one value under two output
// names) is returned once as itself and then as a linalg.copy per repeat, so that
// buffer-results-to-out-params gets one buffer per result. Distinct values are untouched.
// RUN: qkv-opt %s --pass-pipeline="builtin.module(func.func(qkv-copy-repeated-results))" | FileCheck %s

// CHECK-LABEL: func.func @twice
// CHECK-SAME: (%[[X:.*]]: tensor<?x4xf32>)
// CHECK: %[[Y:.*]] = qkv.scale %[[X]]
// CHECK: %[[E:.*]] = tensor.empty
// CHECK: %[[C:.*]] = linalg.copy ins(%[[Y]] : tensor<?x4xf32>) outs(%[[E]] : tensor<?x4xf32>)
// CHECK: return %[[Y]], %[[C]] : tensor<?x4xf32>, tensor<?x4xf32>
func.func @twice(%x: tensor<?x4xf32>) -> (tensor<?x4xf32>, tensor<?x4xf32>) {
  %y = qkv.scale %x by 2.0 : tensor<?x4xf32> -> tensor<?x4xf32>
  return %y, %y : tensor<?x4xf32>, tensor<?x4xf32>
}

// CHECK-LABEL: func.func @distinct
// CHECK-NOT: linalg.copy
// CHECK: return
func.func @distinct(%x: tensor<?x4xf32>) -> (tensor<?x4xf32>, tensor<?x4xf32>) {
  %y = qkv.scale %x by 2.0 : tensor<?x4xf32> -> tensor<?x4xf32>
  %z = qkv.scale %x by 3.0 : tensor<?x4xf32> -> tensor<?x4xf32>
  return %y, %z : tensor<?x4xf32>, tensor<?x4xf32>
}
