func.func @mask_positions(%s: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %0 = qkv.mask %s : tensor<?x?xf32> -> tensor<?x?xf32> {
  ^bb0(%b: index, %h: index, %qi: i64, %ki: i64, %lq: index, %lk: index):
    %c = arith.cmpi sge, %qi, %ki : i64
    qkv.yield %c : i1
  }
  return %0 : tensor<?x?xf32>
}
