func.func @integer_ids(%t: tensor<5x2xf32>, %ids: tensor<?xf32>) -> tensor<?x2xf32> {
  %0 = qkv.embedding %t[%ids] : (tensor<?xf32>, tensor<5x2xf32>) -> tensor<?x2xf32>
  return %0 : tensor<?x2xf32>
}
