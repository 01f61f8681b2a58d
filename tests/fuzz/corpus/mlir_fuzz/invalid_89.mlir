func.func @cache_view_batch(%past: tensor<3x2x16x8xf32>, %len: tensor<2xi64>, %new: tensor<2x2x1x8xf32>) -> tensor<2x2x17x8xf32> {
  %0 = qkv.cache_view %past[%len], %new : (tensor<3x2x16x8xf32>, tensor<2xi64>, tensor<2x2x1x8xf32>) -> tensor<2x2x17x8xf32>
  return %0 : tensor<2x2x17x8xf32>
}
