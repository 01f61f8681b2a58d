func.func @concat_element_types(%a: tensor<2x3xf32>, %b: tensor<4x3xf64>) -> tensor<6x3xf32> {
  %0 = qkv.concat %a, %b axis 0 : (tensor<2x3xf32>, tensor<4x3xf64>) -> tensor<6x3xf32>
  return %0 : tensor<6x3xf32>
}
