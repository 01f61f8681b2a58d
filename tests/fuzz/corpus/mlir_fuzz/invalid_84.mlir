func.func @linear_attention_feature_map(%q: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %0 = qkv.linear_attention %q, %q, %q feature_map "softmax" : tensor<?x4xf32>, tensor<?x4xf32>, tensor<?x4xf32> -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}
