func.func @transpose_axis(%x: tensor<3x4xf32>) -> tensor<4x3xf32> {
  %0 = qkv.transpose %x axes(0, -3) : tensor<3x4xf32> -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}
