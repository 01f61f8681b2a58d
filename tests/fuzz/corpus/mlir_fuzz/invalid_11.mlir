func.func @result_dim(%x: tensor<?x5xf32>) -> tensor<?x4xf32> {
  %0 = qkv.gelu %x : tensor<?x5xf32> -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}
