func.func @matmul_result_dims(%a: tensor<4x6xf32>, %b: tensor<6x5xf32>) -> tensor<5x4xf32> {
  %0 = qkv.matmul %a, %b : (tensor<4x6xf32>, tensor<6x5xf32>) -> tensor<5x4xf32>
  return %0 : tensor<5x4xf32>
}
