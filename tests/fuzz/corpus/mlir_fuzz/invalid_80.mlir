func.func @attention_kv_heads(%q: tensor<4x?x4xf32>, %k: tensor<2x?x4xf32>, %v: tensor<1x?x4xf32>) -> tensor<4x?x4xf32> {
  %0 = qkv.attention %q, %k, %v : tensor<4x?x4xf32>, tensor<2x?x4xf32>, tensor<1x?x4xf32> -> tensor<4x?x4xf32>
  return %0 : tensor<4x?x4xf32>
}
