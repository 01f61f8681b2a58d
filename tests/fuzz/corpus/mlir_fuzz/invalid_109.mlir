func.func @score_mod_result_type(%s: tensor<?x4xf32>) -> tensor<?x4xf64> {
  %0 = qkv.score_mod %s : tensor<?x4xf32> -> tensor<?x4xf64> {
  ^bb0(%x: f32, %b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index):
    qkv.yield %x : f32
  }
  return %0 : tensor<?x4xf64>
}
