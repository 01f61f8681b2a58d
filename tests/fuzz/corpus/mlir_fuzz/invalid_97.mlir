func.func @matmul_result_batch(%a: tensor<2x4x6xf32>, %b: tensor<6x5xf32>) -> tensor<7x4x5xf32> {
  %0 = qkv.matmul %a, %b : (tensor<2x4x6xf32>, tensor<6x5xf32>) -> tensor<7x4x5xf32>
  return %0 : tensor<7x4x5xf32>
}
