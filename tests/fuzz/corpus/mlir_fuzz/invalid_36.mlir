func.func @broadcast_lhs_shorter(%a: tensor<5xf32>, %b: tensor<?x6xf32>) -> tensor<?x6xf32> {
  %0 = qkv.sub %a, %b : (tensor<5xf32>, tensor<?x6xf32>) -> tensor<?x6xf32>
  return %0 : tensor<?x6xf32>
}
