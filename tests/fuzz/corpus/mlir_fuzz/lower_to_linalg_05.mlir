func.func @linear(%x: tensor<?x4xf32>, %w: tensor<4x3xf32>, %b: tensor<3xf32>) -> tensor<?x3xf32> {
  %0 = qkv.linear %x, %w bias %b : tensor<?x4xf32>, tensor<4x3xf32>, tensor<3xf32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}
