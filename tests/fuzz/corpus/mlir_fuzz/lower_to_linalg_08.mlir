func.func @matmul_broadcast(%a: tensor<?x?x4xf32>, %b: tensor<4x3xf32>) -> tensor<?x?x3xf32> {
  %0 = qkv.matmul %a, %b : (tensor<?x?x4xf32>, tensor<4x3xf32>) -> tensor<?x?x3xf32>
  return %0 : tensor<?x?x3xf32>
}
