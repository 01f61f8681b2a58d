func.func @matmul_contraction(%a: tensor<4x6xf32>, %b: tensor<5x3xf32>) -> tensor<4x3xf32> {
  %0 = qkv.matmul %a, %b : (tensor<4x6xf32>, tensor<5x3xf32>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}
