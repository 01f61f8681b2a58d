func.func @merge(%x: tensor<2x?x3xf32>) -> tensor<?x6xf32> {
  %0 = qkv.merge_heads %x : tensor<2x?x3xf32> -> tensor<?x6xf32>
  return %0 : tensor<?x6xf32>
}
