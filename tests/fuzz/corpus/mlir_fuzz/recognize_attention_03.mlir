func.func @wrong_axis(%q: tensor<?x6xf32>, %k: tensor<?x6xf32>, %v: tensor<?x6xf32>) -> tensor<?x6xf32> {
  %kt = qkv.transpose %k axes(0, 1) : tensor<?x6xf32> -> tensor<6x?xf32>
  %s = qkv.matmul %q, %kt : (tensor<?x6xf32>, tensor<6x?xf32>) -> tensor<?x?xf32>
  %p = qkv.softmax %s axis 0 : tensor<?x?xf32> -> tensor<?x?xf32>
  %o = qkv.matmul %p, %v : (tensor<?x?xf32>, tensor<?x6xf32>) -> tensor<?x6xf32>
  return %o : tensor<?x6xf32>
}
