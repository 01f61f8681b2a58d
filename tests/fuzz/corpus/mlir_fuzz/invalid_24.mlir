func.func @transpose_rank(%x: tensor<3x4xf32>) -> tensor<4x3x1xf32> {
  %0 = qkv.transpose %x axes(0, 1) : tensor<3x4xf32> -> tensor<4x3x1xf32>
  return %0 : tensor<4x3x1xf32>
}
