func.func @gqa_dynamic_heads(%q: tensor<?x?x4xf32>, %k: tensor<2x?x4xf32>) -> tensor<?x?x4xf32> {
  %0 = qkv.attention %q, %k, %k : tensor<?x?x4xf32>, tensor<2x?x4xf32>, tensor<2x?x4xf32> -> tensor<?x?x4xf32>
  return %0 : tensor<?x?x4xf32>
}
