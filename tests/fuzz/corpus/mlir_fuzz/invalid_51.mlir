func.func @linear_result(%x: tensor<?x4xf32>, %w: tensor<4x3xf32>) -> tensor<?x4xf32> {
  %0 = qkv.linear %x, %w : tensor<?x4xf32>, tensor<4x3xf32> -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}
