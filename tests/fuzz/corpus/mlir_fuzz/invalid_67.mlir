func.func @score_mod_first_argument(%s: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %0 = qkv.score_mod %s : tensor<?x?xf32> -> tensor<?x?xf32> {
  ^bb0(%x: f64, %b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index):
    %y = arith.truncf %x : f64 to f32
    qkv.yield %y : f32
  }
  return %0 : tensor<?x?xf32>
}
