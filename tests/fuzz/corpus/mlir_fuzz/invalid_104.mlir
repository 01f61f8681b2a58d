func.func @concat_result_type(%a: tensor<2x3xf32>, %b: tensor<4x3xf32>) -> tensor<6x3xf64> {
  %0 = qkv.concat %a, %b axis 0 : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<6x3xf64>
  return %0 : tensor<6x3xf64>
}
