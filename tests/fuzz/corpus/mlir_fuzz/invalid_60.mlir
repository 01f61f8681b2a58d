func.func @concat_dims(%a: tensor<?x2xf32>, %b: tensor<?x3xf32>) -> tensor<?x2xf32> {
  %0 = qkv.concat %a, %b axis 0 : (tensor<?x2xf32>, tensor<?x3xf32>) -> tensor<?x2xf32>
  return %0 : tensor<?x2xf32>
}
