
func.func @attention_rank(%q: tensor<?xf32>) -> tensor<?xf32> {
  %0 = qkv.attention %q, %q, %q : tensor<?xf32>, tensor<?xf32>, tensor<?xf32> -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
