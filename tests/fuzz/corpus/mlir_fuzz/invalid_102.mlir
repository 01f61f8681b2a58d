func.func @concat_result_other_dim(%a: tensor<2x3xf32>, %b: tensor<4x3xf32>) -> tensor<6x2xf32> {
  %0 = qkv.concat %a, %b axis -2 : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<6x2xf32>
  return %0 : tensor<6x2xf32>
}
