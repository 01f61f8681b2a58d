func.func @heads_in_place(%x: tensor<1x?x32xf32>) -> tensor<1x?x32xf32> {
  %q = qkv.split_heads %x heads 2 : tensor<1x?x32xf32> -> tensor<1x2x?x16xf32>
  %a = qkv.attention %q, %q, %q : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32> -> tensor<1x2x?x16xf32>
  %m = qkv.merge_heads %a : tensor<1x2x?x16xf32> -> tensor<1x?x32xf32>
  return %m : tensor<1x?x32xf32>
}
