func.func @mask_two_blocks(%s: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %0 = qkv.mask %s : tensor<?x?xf32> -> tensor<?x?xf32> {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index):
    %c = arith.cmpi sge, %qi, %ki : index
    cf.br ^bb1
  ^bb1:
    qkv.yield %c : i1
  }
  return %0 : tensor<?x?xf32>
}
