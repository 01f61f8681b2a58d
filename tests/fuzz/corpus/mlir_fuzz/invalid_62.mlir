func.func @embedding_result(%t: tensor<5x2xf32>, %ids: tensor<?xi64>) -> tensor<?xf32> {
  %0 = qkv.embedding %t[%ids] : (tensor<?xi64>, tensor<5x2xf32>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
