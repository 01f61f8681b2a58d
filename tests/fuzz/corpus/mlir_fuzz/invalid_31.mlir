func.func @split_heads_features(%x: tensor<?x6xf32>) -> tensor<4x?x2xf32> {
  %0 = qkv.split_heads %x heads 4 : tensor<?x6xf32> -> tensor<4x?x2xf32>
  return %0 : tensor<4x?x2xf32>
}
