func.func @split(%x: tensor<?x?x6xf32>) -> tensor<?x2x?x3xf32> {
  %0 = qkv.split_heads %x heads 2 : tensor<?x?x6xf32> -> tensor<?x2x?x3xf32>
  return %0 : tensor<?x2x?x3xf32>
}
