func.func @split_heads_heads(%x: tensor<?x6xf32>) -> tensor<3x?x2xf32> {
  %0 = qkv.split_heads %x heads 2 : tensor<?x6xf32> -> tensor<3x?x2xf32>
  return %0 : tensor<3x?x2xf32>
}
