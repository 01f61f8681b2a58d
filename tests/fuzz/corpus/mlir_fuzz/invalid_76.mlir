func.func @attention_mixed_ranks(%q: tensor<2x?x4xf32>, %k: tensor<?x4xf32>) -> tensor<2x?x4xf32> {
  %0 = qkv.attention %q, %k, %k : tensor<2x?x4xf32>, tensor<?x4xf32>, tensor<?x4xf32> -> tensor<2x?x4xf32>
  return %0 : tensor<2x?x4xf32>
}
