func.func @score_region_arity(%q: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %0 = qkv.attention %q, %q, %q : tensor<?x4xf32>, tensor<?x4xf32>, tensor<?x4xf32> -> tensor<?x4xf32> score {
  ^bb0(%s: f32, %b: index):
    qkv.yield %s : f32
  }
  return %0 : tensor<?x4xf32>
}
