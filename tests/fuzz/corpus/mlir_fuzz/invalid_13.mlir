func.func @silu_result(%x: tensor<3xf32>) -> tensor<4xf32> {
  %0 = qkv.silu %x : tensor<3xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
