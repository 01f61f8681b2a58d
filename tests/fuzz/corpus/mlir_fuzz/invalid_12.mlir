func.func @result_element_type(%x: tensor<?x5xf32>) -> tensor<?x5xf64> {
  %0 = qkv.elu %x alpha 1.0 : tensor<?x5xf32> -> tensor<?x5xf64>
  return %0 : tensor<?x5xf64>
}
