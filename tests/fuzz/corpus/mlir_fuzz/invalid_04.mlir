func.func @attribute_type(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = "qkv.softmax"(%x) {axis = 1.0 : f32} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}
