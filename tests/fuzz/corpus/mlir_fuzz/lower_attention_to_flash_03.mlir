func.func @decode_causal(%q: tensor<1x16x1x64xf32>, %k: tensor<1x16x?x64xf32>, %v: tensor<1x16x?x64xf32>) -> tensor<1x16x1x64xf32> {
  %a = qkv.attention %q, %k, %v : tensor<1x16x1x64xf32>, tensor<1x16x?x64xf32>, tensor<1x16x?x64xf32> -> tensor<1x16x1x64xf32>
    mask {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index):
      %c = arith.cmpi sge, %qi, %ki : index
      qkv.yield %c : i1
    }
  return %a : tensor<1x16x1x64xf32>
}
