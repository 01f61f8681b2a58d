func.func @split_heads_length(%x: tensor<5x6xf32>) -> tensor<2x4x3xf32> {
  %0 = qkv.split_heads %x heads 2 : tensor<5x6xf32> -> tensor<2x4x3xf32>
  return %0 : tensor<2x4x3xf32>
}
