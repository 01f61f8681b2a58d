func.func @rope_positions(%x: tensor<2x?x8xf32>, %pos: tensor<2x?xi64>) -> tensor<2x?x8xf32> {
  %2 = qkv.rope %x positions %pos : tensor<2x?xi64> base 10000.0 offset 0 : tensor<2x?x8xf32> -> tensor<2x?x8xf32>
  return %2 : tensor<2x?x8xf32>
}
