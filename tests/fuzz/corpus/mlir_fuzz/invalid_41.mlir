func.func @matmul_rank(%a: tensor<4xf32>, %b: tensor<4x3xf32>) -> tensor<3xf32> {
  %0 = qkv.matmul %a, %b : (tensor<4xf32>, tensor<4x3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}
