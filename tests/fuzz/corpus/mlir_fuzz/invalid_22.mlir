func.func @rope_result(%x: tensor<?x4xf32>) -> tensor<?x4xf64> {
  %0 = qkv.rope %x base 10000.0 offset 0 : tensor<?x4xf32> -> tensor<?x4xf64>
  return %0 : tensor<?x4xf64>
}
