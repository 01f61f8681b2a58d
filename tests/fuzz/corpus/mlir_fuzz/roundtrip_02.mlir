func.func @f64(%x: tensor<4x?xf64>, %ids: tensor<?x?xi64>, %t: tensor<7x4xf64>) -> tensor<?x?x4xf64> {
  %0 = qkv.embedding %t[%ids] : (tensor<?x?xi64>, tensor<7x4xf64>) -> tensor<?x?x4xf64>
  %1 = qkv.softmax %x axis 0 : tensor<4x?xf64> -> tensor<4x?xf64>
  return %0 : tensor<?x?x4xf64>
}
