func.func @paged_cache_view(%pool: tensor<?x2x4x8xf32>, %table: tensor<2x3xi32>, %len: tensor<2xi64>, %new: tensor<2x2x?x8xf32>) -> tensor<2x2x?x8xf32> {
  %1 = qkv.paged_cache_view %pool[%table, %len], %new : (tensor<?x2x4x8xf32>, tensor<2x3xi32>, tensor<2xi64>, tensor<2x2x?x8xf32>) -> tensor<2x2x?x8xf32>
  return %1 : tensor<2x2x?x8xf32>
}
