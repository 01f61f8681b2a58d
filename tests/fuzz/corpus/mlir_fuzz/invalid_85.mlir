func.func @linear_attention_shapes(%q: tensor<?x4xf32>, %k: tensor<?x5xf32>) -> tensor<?x5xf32> {
  %0 = qkv.linear_attention %q, %k, %k feature_map "relu" : tensor<?x4xf32>, tensor<?x5xf32>, tensor<?x5xf32> -> tensor<?x5xf32>
  return %0 : tensor<?x5xf32>
}
