func.func @rope_positions_offset(%x: tensor<?x4xf32>, %p: tensor<?xi64>) -> tensor<?x4xf32> {
  %0 = qkv.rope %x positions %p : tensor<?xi64> base 10000.0 offset 3 : tensor<?x4xf32> -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}
