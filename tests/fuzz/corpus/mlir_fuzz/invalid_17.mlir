func.func @pe_rank(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = qkv.sinusoidal_pe %x base 10000.0 offset 0 : tensor<8xf32> -> tensor<8xf32>
  return %0 : tensor<8xf32>
}
