func.func @missing_attribute(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = "qkv.softmax"(%x) : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}
