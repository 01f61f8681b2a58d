func.func @mask_yields_float(%s: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %0 = qkv.mask %s : tensor<?x?xf32> -> tensor<?x?xf32> {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index):
    %c = arith.constant 1.0 : f32
    qkv.yield %c : f32
  }
  return %0 : tensor<?x?xf32>
}
