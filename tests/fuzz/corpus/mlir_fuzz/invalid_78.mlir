func.func @attention_sequence(%q: tensor<?x4xf32>, %k: tensor<7x4xf32>, %v: tensor<8x4xf32>) -> tensor<?x4xf32> {
  %0 = qkv.attention %q, %k, %v : tensor<?x4xf32>, tensor<7x4xf32>, tensor<8x4xf32> -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}
