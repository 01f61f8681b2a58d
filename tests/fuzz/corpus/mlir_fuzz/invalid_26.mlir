
func.func @split_heads_rank(%x: tensor<?x6xf32>) -> tensor<?x6xf32> {
  %0 = qkv.split_heads %x heads 2 : tensor<?x6xf32> -> tensor<?x6xf32>
  return %0 : tensor<?x6xf32>
}
