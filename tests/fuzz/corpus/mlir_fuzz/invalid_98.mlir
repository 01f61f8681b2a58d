func.func @linear_rank0(%x: tensor<f32>, %w: tensor<4x3xf32>) -> tensor<3xf32> {
  %0 = qkv.linear %x, %w : tensor<f32>, tensor<4x3xf32> -> tensor<3xf32>
  return %0 : tensor<3xf32>
}
