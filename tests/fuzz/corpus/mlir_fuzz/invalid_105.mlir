func.func @embedding_result_dims(%t: tensor<5x2xf32>, %ids: tensor<3xi64>) -> tensor<4x2xf32> {
  %0 = qkv.embedding %t[%ids] : (tensor<3xi64>, tensor<5x2xf32>) -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}
