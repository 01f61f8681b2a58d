func.func @decode_paged(%q: tensor<2x4x1x16xf32>, %pool: tensor<?x2x8x16xf32>, %table: tensor<2x4xi32>, %len: tensor<2xi64>, %k: tensor<2x2x1x16xf32>, %v: tensor<2x2x1x16xf32>) -> tensor<2x4x1x16xf32> {
  %kc = qkv.paged_cache_view %pool[%table, %len], %k : (tensor<?x2x8x16xf32>, tensor<2x4xi32>, tensor<2xi64>, tensor<2x2x1x16xf32>) -> tensor<2x2x33x16xf32>
  %vc = qkv.paged_cache_view %pool[%table, %len], %v : (tensor<?x2x8x16xf32>, tensor<2x4xi32>, tensor<2xi64>, tensor<2x2x1x16xf32>) -> tensor<2x2x33x16xf32>
  %a = qkv.attention %q, %kc, %vc captures(%len : tensor<2xi64>) : tensor<2x4x1x16xf32>, tensor<2x2x33x16xf32>, tensor<2x2x33x16xf32> -> tensor<2x4x1x16xf32>
    mask {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index, %l: tensor<2xi64>):
      %e = tensor.extract %l[%b] : tensor<2xi64>
      %ei = arith.index_cast %e : i64 to index
      %lim = arith.addi %ei, %qi : index
      %c = arith.cmpi sle, %ki, %lim : index
      qkv.yield %c : i1
    }
  return %a : tensor<2x4x1x16xf32>
}
