func.func @embedding_result_type(%t: tensor<5x2xf32>, %ids: tensor<3xi64>) -> tensor<3x2xf64> {
  %0 = qkv.embedding %t[%ids] : (tensor<3xi64>, tensor<5x2xf32>) -> tensor<3x2xf64>
  return %0 : tensor<3x2xf64>
}
