func.func @split_heads_dynamic_head_dim(%x: tensor<?x6xf32>) -> tensor<2x?x?xf32> {
  %0 = qkv.split_heads %x heads 2 : tensor<?x6xf32> -> tensor<2x?x?xf32>
  return %0 : tensor<2x?x?xf32>
}
