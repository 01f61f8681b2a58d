func.func @negative_axes(%x: tensor<?x2xf32>) -> (tensor<2x?xf32>, tensor<?x4xf32>, tensor<?x2xf32>) {
  %0 = qkv.transpose %x axes(-2, -1) : tensor<?x2xf32> -> tensor<2x?xf32>
  %1 = qkv.concat %x, %x axis -1 : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x4xf32>
  %2 = qkv.softmax %x axis -1 : tensor<?x2xf32> -> tensor<?x2xf32>
  return %0, %1, %2 : tensor<2x?xf32>, tensor<?x4xf32>, tensor<?x2xf32>
}
