func.func @rms_norm(%x: tensor<?x5xf32>) -> tensor<?x5xf32> {
  %0 = qkv.rms_norm %x eps 0.01 : tensor<?x5xf32> -> tensor<?x5xf32>
  return %0 : tensor<?x5xf32>
}
