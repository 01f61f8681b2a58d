func.func @rms_norm_gamma(%x: tensor<?x4xf32>, %g: tensor<3xf32>) -> tensor<?x4xf32> {
  %0 = qkv.rms_norm %x gamma %g : tensor<3xf32> eps 0.00001 : tensor<?x4xf32> -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}
