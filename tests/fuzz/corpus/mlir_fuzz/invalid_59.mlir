func.func @concat_rank(%a: tensor<?x2xf32>, %b: tensor<2xf32>) -> tensor<?x2xf32> {
  %0 = qkv.concat %a, %b axis 0 : (tensor<?x2xf32>, tensor<2xf32>) -> tensor<?x2xf32>
  return %0 : tensor<?x2xf32>
}
