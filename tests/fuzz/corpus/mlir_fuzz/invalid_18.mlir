func.func @pe_result(%x: tensor<?x8xf32>) -> tensor<?x4xf32> {
  %0 = qkv.sinusoidal_pe %x base 10000.0 offset 0 : tensor<?x8xf32> -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}
