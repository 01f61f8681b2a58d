func.func @isolated_from_above(%s: tensor<?x?xf32>, %t: index) -> tensor<?x?xf32> {
  %0 = qkv.mask %s : tensor<?x?xf32> -> tensor<?x?xf32> {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index):
    %c = arith.cmpi sge, %qi, %t : index
    qkv.yield %c : i1
  }
  return %0 : tensor<?x?xf32>
}
