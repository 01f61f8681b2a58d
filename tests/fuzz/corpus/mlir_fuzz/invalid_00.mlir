

func.func @float_operand(%x: tensor<4xi32>) -> tensor<4xi32> {
  %0 = qkv.scale %x by 2.0 : tensor<4xi32> -> tensor<4xi32>
  return %0 : tensor<4xi32>
}
