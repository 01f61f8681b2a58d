func.func @transpose_dims(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %0 = qkv.transpose %x axes(0, 1) : tensor<3x4xf32> -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}
