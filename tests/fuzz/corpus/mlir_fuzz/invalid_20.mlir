func.func @rope_odd(%x: tensor<?x5xf32>) -> tensor<?x5xf32> {
  %0 = qkv.rope %x base 10000.0 offset 0 : tensor<?x5xf32> -> tensor<?x5xf32>
  return %0 : tensor<?x5xf32>
}
