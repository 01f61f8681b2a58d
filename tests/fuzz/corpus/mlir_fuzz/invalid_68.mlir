func.func @attention_score_argument(%q: tensor<?x4xf64>) -> tensor<?x4xf64> {
  %0 = qkv.attention %q, %q, %q : tensor<?x4xf64>, tensor<?x4xf64>, tensor<?x4xf64> -> tensor<?x4xf64> score {
  ^bb0(%x: f32, %b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index):
    %y = arith.extf %x : f32 to f64
    qkv.yield %y : f64
  }
  return %0 : tensor<?x4xf64>
}
