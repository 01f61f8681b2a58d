func.func @div_result(%a: tensor<?x6xf32>, %b: tensor<?x6xf32>) -> tensor<?x6xf64> {
  %0 = qkv.div %a, %b : (tensor<?x6xf32>, tensor<?x6xf32>) -> tensor<?x6xf64>
  return %0 : tensor<?x6xf64>
}
