func.func @split_heads_zero_heads(%x: tensor<?x6xf32>) -> tensor<?x?x2xf32> {
  %0 = qkv.split_heads %x heads 0 : tensor<?x6xf32> -> tensor<?x?x2xf32>
  return %0 : tensor<?x?x2xf32>
}
