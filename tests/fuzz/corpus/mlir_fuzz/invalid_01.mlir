func.func @unranked_operand(%x: tensor<*xf32>) -> tensor<4xf32> {
  %0 = "qkv.silu"(%x) : (tensor<*xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
