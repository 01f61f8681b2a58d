func.func @layer_norm_result(%x: tensor<?x4xf32>) -> tensor<?x5xf32> {
  %0 = qkv.layer_norm %x eps 0.00001 : tensor<?x4xf32> -> tensor<?x5xf32>
  return %0 : tensor<?x5xf32>
}
