func.func @concat_axis(%a: tensor<?x2xf32>) -> tensor<?x4xf32> {
  %0 = qkv.concat %a, %a axis 2 : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}
