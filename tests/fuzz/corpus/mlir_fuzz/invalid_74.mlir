func.func @attention_mask_arity(%q: tensor<?x4xf32>, %t: tensor<2xf32>) -> tensor<?x4xf32> {
  %0 = qkv.attention %q, %q, %q captures(%t : tensor<2xf32>) : tensor<?x4xf32>, tensor<?x4xf32>, tensor<?x4xf32> -> tensor<?x4xf32> mask {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index):
    %c = arith.cmpi sge, %qi, %ki : index
    qkv.yield %c : i1
  }
  return %0 : tensor<?x4xf32>
}
