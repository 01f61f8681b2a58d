func.func @embedding(%ids: tensor<?xi32>, %table: tensor<10x6xf32>) -> tensor<?x6xf32> {
  %0 = qkv.embedding %table[%ids] : (tensor<?xi32>, tensor<10x6xf32>) -> tensor<?x6xf32>
  return %0 : tensor<?x6xf32>
}
