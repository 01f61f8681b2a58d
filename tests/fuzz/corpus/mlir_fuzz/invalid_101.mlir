func.func @concat_result_sum(%a: tensor<2x3xf32>, %b: tensor<4x3xf32>) -> tensor<5x3xf32> {
  %0 = qkv.concat %a, %b axis 0 : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<5x3xf32>
  return %0 : tensor<5x3xf32>
}
