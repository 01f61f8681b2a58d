func.func @softmax_axis(%x: tensor<?x5xf32>) -> tensor<?x5xf32> {
  %0 = qkv.softmax %x axis 2 : tensor<?x5xf32> -> tensor<?x5xf32>
  return %0 : tensor<?x5xf32>
}
