func.func @attention_result(%q: tensor<?x4xf32>, %v: tensor<?x3xf32>) -> tensor<?x4xf32> {
  %0 = qkv.attention %q, %q, %v : tensor<?x4xf32>, tensor<?x4xf32>, tensor<?x3xf32> -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}
