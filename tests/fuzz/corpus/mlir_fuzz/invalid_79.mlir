func.func @attention_batch(%q: tensor<2x1x?x4xf32>, %k: tensor<3x1x?x4xf32>) -> tensor<2x1x?x4xf32> {
  %0 = qkv.attention %q, %k, %k : tensor<2x1x?x4xf32>, tensor<3x1x?x4xf32>, tensor<3x1x?x4xf32> -> tensor<2x1x?x4xf32>
  return %0 : tensor<2x1x?x4xf32>
}
