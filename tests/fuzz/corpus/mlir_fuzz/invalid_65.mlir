func.func @mask_arity(%s: tensor<?x?xf32>, %t: tensor<2xf32>) -> tensor<?x?xf32> {
  %0 = qkv.mask %s captures(%t : tensor<2xf32>) : tensor<?x?xf32> -> tensor<?x?xf32> {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index):
    %c = arith.cmpi sge, %qi, %ki : index
    qkv.yield %c : i1
  }
  return %0 : tensor<?x?xf32>
}
