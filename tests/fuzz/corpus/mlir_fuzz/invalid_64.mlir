func.func @score_mod_rank(%s: tensor<1x1x1x?x?xf32>) -> tensor<1x1x1x?x?xf32> {
  %0 = qkv.score_mod %s : tensor<1x1x1x?x?xf32> -> tensor<1x1x1x?x?xf32> {
  ^bb0(%x: f32, %b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index):
    qkv.yield %x : f32
  }
  return %0 : tensor<1x1x1x?x?xf32>
}
