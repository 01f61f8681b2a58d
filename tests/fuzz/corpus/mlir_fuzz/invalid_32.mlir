func.func @merge_heads_rank(%x: tensor<?x6xf32>) -> tensor<?xf32> {
  %0 = qkv.merge_heads %x : tensor<?x6xf32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
