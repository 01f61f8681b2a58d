func.func @binary_result(%a: tensor<?x6xf32>, %b: tensor<6xf32>) -> tensor<6xf32> {
  %0 = qkv.mul %a, %b : (tensor<?x6xf32>, tensor<6xf32>) -> tensor<6xf32>
  return %0 : tensor<6xf32>
}
