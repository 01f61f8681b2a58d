func.func @score_mod_yields_condition(%s: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %0 = qkv.score_mod %s : tensor<?x?xf32> -> tensor<?x?xf32> {
  ^bb0(%x: f32, %b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index):
    %c = arith.cmpi sge, %qi, %ki : index
    qkv.yield %c : i1
  }
  return %0 : tensor<?x?xf32>
}
