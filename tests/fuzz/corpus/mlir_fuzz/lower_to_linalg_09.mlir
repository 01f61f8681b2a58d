func.func @layer_norm(%x: tensor<?x5xf32>, %g: tensor<5xf32>, %b: tensor<5xf32>) -> tensor<?x5xf32> {
  %0 = qkv.layer_norm %x gamma %g : tensor<5xf32> beta %b : tensor<5xf32> eps 0.00001 : tensor<?x5xf32> -> tensor<?x5xf32>
  return %0 : tensor<?x5xf32>
}
