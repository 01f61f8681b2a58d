func.func @swiglu_result(%a: tensor<?x6xf32>, %b: tensor<?x6xf32>) -> tensor<?x6x1xf32> {
  %0 = qkv.swiglu %a, %b : (tensor<?x6xf32>, tensor<?x6xf32>) -> tensor<?x6x1xf32>
  return %0 : tensor<?x6x1xf32>
}
