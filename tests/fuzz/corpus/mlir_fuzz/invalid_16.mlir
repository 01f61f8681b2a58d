func.func @softmax_result(%x: tensor<?x5xf32>) -> tensor<?x6xf32> {
  %0 = qkv.softmax %x axis 1 : tensor<?x5xf32> -> tensor<?x6xf32>
  return %0 : tensor<?x6xf32>
}
