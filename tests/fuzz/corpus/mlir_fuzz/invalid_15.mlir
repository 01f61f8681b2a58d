func.func @softmax_negative_axis(%x: tensor<?x5xf32>) -> tensor<?x5xf32> {
  %0 = qkv.softmax %x axis -3 : tensor<?x5xf32> -> tensor<?x5xf32>
  return %0 : tensor<?x5xf32>
}
