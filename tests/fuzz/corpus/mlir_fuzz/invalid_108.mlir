func.func @mask_result_shape(%s: tensor<?x4xf32>) -> tensor<?x5xf32> {
  %0 = qkv.mask %s : tensor<?x4xf32> -> tensor<?x5xf32> {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index):
    %c = arith.cmpi sge, %qi, %ki : index
    qkv.yield %c : i1
  }
  return %0 : tensor<?x5xf32>
}
