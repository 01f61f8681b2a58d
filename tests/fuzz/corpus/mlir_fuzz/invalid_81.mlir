func.func @gqa_heads(%q: tensor<3x?x4xf32>, %k: tensor<2x?x4xf32>) -> tensor<3x?x4xf32> {
  %0 = qkv.attention %q, %k, %k : tensor<3x?x4xf32>, tensor<2x?x4xf32>, tensor<2x?x4xf32> -> tensor<3x?x4xf32>
  return %0 : tensor<3x?x4xf32>
}
