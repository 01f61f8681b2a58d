func.func @linear_weight(%x: tensor<?x4xf32>, %w: tensor<4x3x1xf32>) -> tensor<?x3xf32> {
  %0 = qkv.linear %x, %w : tensor<?x4xf32>, tensor<4x3x1xf32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}
