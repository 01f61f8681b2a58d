func.func @merge_heads_dynamic(%x: tensor<?x?x3xf32>) -> tensor<?x?xf32> {
  %0 = qkv.merge_heads %x : tensor<?x?x3xf32> -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}
