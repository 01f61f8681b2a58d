func.func @rms_norm_result(%x: tensor<?x4xf32>) -> tensor<?x4xf64> {
  %0 = qkv.rms_norm %x eps 0.00001 : tensor<?x4xf32> -> tensor<?x4xf64>
  return %0 : tensor<?x4xf64>
}
