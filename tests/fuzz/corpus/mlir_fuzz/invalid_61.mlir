func.func @embedding_table(%t: tensor<5xf32>, %ids: tensor<?xi32>) -> tensor<?x2xf32> {
  %0 = qkv.embedding %t[%ids] : (tensor<?xi32>, tensor<5xf32>) -> tensor<?x2xf32>
  return %0 : tensor<?x2xf32>
}
