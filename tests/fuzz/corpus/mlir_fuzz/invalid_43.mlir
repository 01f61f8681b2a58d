func.func @matmul_batch(%a: tensor<2x3x4x6xf32>, %b: tensor<3x6x5xf32>) -> tensor<2x3x4x5xf32> {
  %0 = qkv.matmul %a, %b : (tensor<2x3x4x6xf32>, tensor<3x6x5xf32>) -> tensor<2x3x4x5xf32>
  return %0 : tensor<2x3x4x5xf32>
}
