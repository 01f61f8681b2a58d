func.func @paged_cache_view_result(%pool: tensor<9x2x4x8xf32>, %table: tensor<2x3xi32>, %len: tensor<2xi64>, %new: tensor<2x2x1x8xf32>) -> tensor<2x2x12x8xf32> {
  %0 = qkv.paged_cache_view %pool[%table, %len], %new : (tensor<9x2x4x8xf32>, tensor<2x3xi32>, tensor<2xi64>, tensor<2x2x1x8xf32>) -> tensor<2x2x12x8xf32>
  return %0 : tensor<2x2x12x8xf32>
}
