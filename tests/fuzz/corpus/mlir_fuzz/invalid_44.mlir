func.func @matmul_result_rank(%a: tensor<2x4x6xf32>, %b: tensor<6x5xf32>) -> tensor<4x5xf32> {
  %0 = qkv.matmul %a, %b : (tensor<2x4x6xf32>, tensor<6x5xf32>) -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}
