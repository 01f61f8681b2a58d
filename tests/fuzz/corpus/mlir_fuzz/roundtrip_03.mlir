func.func @caches(%past: tensor<2x2x16x8xf32>, %len: tensor<2xi64>, %new: tensor<2x2x?x8xf32>,
                  %pool: tensor<?x2x4x8xf32>, %table: tensor<2x3xi32>, %pos: tensor<2x?xi64>)
    -> (tensor<2x2x?x8xf32>, tensor<2x2x?x8xf32>, tensor<2x2x?x8xf32>) {
  %0 = qkv.cache_view %past[%len], %new : (tensor<2x2x16x8xf32>, tensor<2xi64>, tensor<2x2x?x8xf32>) -> tensor<2x2x?x8xf32>
  %1 = qkv.paged_cache_view %pool[%table, %len], %new : (tensor<?x2x4x8xf32>, tensor<2x3xi32>, tensor<2xi64>, tensor<2x2x?x8xf32>) -> tensor<2x2x?x8xf32>
  %2 = qkv.rope %new positions %pos : tensor<2x?xi64> base 10000.0 offset 0 : tensor<2x2x?x8xf32> -> tensor<2x2x?x8xf32>
  return %0, %1, %2 : tensor<2x2x?x8xf32>, tensor<2x2x?x8xf32>, tensor<2x2x?x8xf32>
}
