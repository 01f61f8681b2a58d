func.func @linear_in(%x: tensor<?x4xf32>, %w: tensor<5x3xf32>) -> tensor<?x3xf32> {
  %0 = qkv.linear %x, %w : tensor<?x4xf32>, tensor<5x3xf32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}
