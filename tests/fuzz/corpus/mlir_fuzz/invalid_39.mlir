func.func @swiglu_gate_up(%a: tensor<?x6xf32>, %b: tensor<?x5xf32>) -> tensor<?x6xf32> {
  %0 = qkv.swiglu %a, %b : (tensor<?x6xf32>, tensor<?x5xf32>) -> tensor<?x6xf32>
  return %0 : tensor<?x6xf32>
}
