func.func @rope_dynamic(%x: tensor<4x?xf32>) -> tensor<4x?xf32> {
  %0 = qkv.rope %x base 10000.0 offset 0 : tensor<4x?xf32> -> tensor<4x?xf32>
  return %0 : tensor<4x?xf32>
}
