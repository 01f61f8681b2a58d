func.func @layer_norm_beta(%x: tensor<?x4xf32>, %g: tensor<4xf32>, %b: tensor<1x4xf32>) -> tensor<?x4xf32> {
  %0 = qkv.layer_norm %x gamma %g : tensor<4xf32> beta %b : tensor<1x4xf32> eps 0.00001 : tensor<?x4xf32> -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}
