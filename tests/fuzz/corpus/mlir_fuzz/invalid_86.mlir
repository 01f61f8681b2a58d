func.func @rope_positions_shape(%x: tensor<2x?x4xf32>, %p: tensor<3x?xi64>) -> tensor<2x?x4xf32> {
  %0 = qkv.rope %x positions %p : tensor<3x?xi64> base 10000.0 offset 0 : tensor<2x?x4xf32> -> tensor<2x?x4xf32>
  return %0 : tensor<2x?x4xf32>
}
