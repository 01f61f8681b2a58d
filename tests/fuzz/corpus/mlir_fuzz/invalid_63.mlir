
func.func @mask_rank(%s: tensor<?xf32>) -> tensor<?xf32> {
  %0 = qkv.mask %s : tensor<?xf32> -> tensor<?xf32> {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index):
    %c = arith.cmpi sge, %qi, %ki : index
    qkv.yield %c : i1
  }
  return %0 : tensor<?xf32>
}
