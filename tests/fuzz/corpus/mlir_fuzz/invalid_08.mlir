func.func @attention_two_blocks(%q: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %0 = qkv.attention %q, %q, %q : tensor<?x4xf32>, tensor<?x4xf32>, tensor<?x4xf32> -> tensor<?x4xf32> mask {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index):
    %c = arith.cmpi sge, %qi, %ki : index
    cf.br ^bb1
  ^bb1:
    qkv.yield %c : i1
  }
  return %0 : tensor<?x4xf32>
}
