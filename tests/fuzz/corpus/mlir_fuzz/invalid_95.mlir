
func.func @attention_zero_kv_heads(%q: tensor<4x?x4xf32>, %k: tensor<0x?x4xf32>) -> tensor<4x?x4xf32> {
  %0 = qkv.attention %q, %k, %k : tensor<4x?x4xf32>, tensor<0x?x4xf32>, tensor<0x?x4xf32> -> tensor<4x?x4xf32>
  return %0 : tensor<4x?x4xf32>
}
