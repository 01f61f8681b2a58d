
func.func @result_rank(%x: tensor<?x5xf32>) -> tensor<?x5x1xf32> {
  %0 = qkv.scale %x by 2.0 : tensor<?x5xf32> -> tensor<?x5x1xf32>
  return %0 : tensor<?x5x1xf32>
}
