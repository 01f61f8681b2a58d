func.func @tiled(%q: tensor<2x33x4xf32>, %k: tensor<1x40x4xf32>, %v: tensor<1x40x3xf32>, %slopes: tensor<2xf32>) -> tensor<2x33x3xf32> {
  %a = qkv.attention %q, %k, %v captures(%slopes : tensor<2xf32>) : tensor<2x33x4xf32>, tensor<1x40x4xf32>, tensor<1x40x3xf32> -> tensor<2x33x3xf32>
    score {
    ^bb0(%x: f32, %b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index, %sl: tensor<2xf32>):
      %e = tensor.extract %sl[%h] : tensor<2xf32>
      %y = arith.addf %x, %e : f32
      qkv.yield %y : f32
    } mask {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index, %sl: tensor<2xf32>):
      %c = arith.cmpi sge, %qi, %ki : index
      qkv.yield %c : i1
    }
  return %a : tensor<2x33x3xf32>
}
