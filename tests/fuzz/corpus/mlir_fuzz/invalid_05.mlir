func.func @operand_segments(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = "qkv.layer_norm"(%x) {eps = 1.0e-5 : f64} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}
