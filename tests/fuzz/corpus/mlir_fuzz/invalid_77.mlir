func.func @attention_head_dim(%q: tensor<?x4xf32>, %k: tensor<?x5xf32>) -> tensor<?x5xf32> {
  %0 = qkv.attention %q, %k, %k : tensor<?x4xf32>, tensor<?x5xf32>, tensor<?x5xf32> -> tensor<?x5xf32>
  return %0 : tensor<?x5xf32>
}
