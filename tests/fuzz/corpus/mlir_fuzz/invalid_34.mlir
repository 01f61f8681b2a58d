func.func @merge_heads_features(%x: tensor<2x?x3xf32>) -> tensor<?x5xf32> {
  %0 = qkv.merge_heads %x : tensor<2x?x3xf32> -> tensor<?x5xf32>
  return %0 : tensor<?x5xf32>
}
