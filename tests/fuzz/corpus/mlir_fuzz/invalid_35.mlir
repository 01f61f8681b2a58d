
func.func @broadcast(%a: tensor<?x6xf32>, %b: tensor<5xf32>) -> tensor<?x6xf32> {
  %0 = qkv.add %a, %b : (tensor<?x6xf32>, tensor<5xf32>) -> tensor<?x6xf32>
  return %0 : tensor<?x6xf32>
}
