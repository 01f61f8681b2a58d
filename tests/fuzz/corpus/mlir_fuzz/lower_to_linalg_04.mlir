func.func @mask(%s: tensor<2x?x?xf32>) -> tensor<2x?x?xf32> {
  %0 = qkv.mask %s : tensor<2x?x?xf32> -> tensor<2x?x?xf32> {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index):
    %c = arith.cmpi sge, %qi, %ki : index
    qkv.yield %c : i1
  }
  return %0 : tensor<2x?x?xf32>
}
