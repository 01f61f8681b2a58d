func.func @softmax(%x: tensor<?x5xf32>) -> tensor<?x5xf32> {
  %0 = qkv.softmax %x axis 1 : tensor<?x5xf32> -> tensor<?x5xf32>
  return %0 : tensor<?x5xf32>
}
