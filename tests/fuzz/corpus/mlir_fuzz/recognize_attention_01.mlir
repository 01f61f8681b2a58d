func.func @full_chain(%q: tensor<2x?x4xf32>, %k: tensor<2x?x4xf32>, %v: tensor<2x?x3xf32>,
                      %slopes: tensor<2xf32>, %doc: tensor<?xi32>) -> tensor<2x?x3xf32> {
  %kt = qkv.transpose %k axes(1, 2) : tensor<2x?x4xf32> -> tensor<2x4x?xf32>
  %s = qkv.matmul %q, %kt : (tensor<2x?x4xf32>, tensor<2x4x?xf32>) -> tensor<2x?x?xf32>
  %sc = qkv.scale %s by 0.5 : tensor<2x?x?xf32> -> tensor<2x?x?xf32>
  %sm = qkv.score_mod %sc captures(%slopes : tensor<2xf32>) : tensor<2x?x?xf32> -> tensor<2x?x?xf32> {
  ^bb0(%x: f32, %b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index, %sl: tensor<2xf32>):
    %e = tensor.extract %sl[%h] : tensor<2xf32>
    %y = arith.addf %x, %e : f32
    qkv.yield %y : f32
  }
  %m = qkv.mask %sm captures(%doc : tensor<?xi32>) : tensor<2x?x?xf32> -> tensor<2x?x?xf32> {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index, %d: tensor<?xi32>):
    %dq = tensor.extract %d[%qi] : tensor<?xi32>
    %dk = tensor.extract %d[%ki] : tensor<?xi32>
    %c = arith.cmpi eq, %dq, %dk : i32
    qkv.yield %c : i1
  }
  %p = qkv.softmax %m axis 2 : tensor<2x?x?xf32> -> tensor<2x?x?xf32>
  %o = qkv.matmul %p, %v : (tensor<2x?x?xf32>, tensor<2x?x3xf32>) -> tensor<2x?x3xf32>
  return %o : tensor<2x?x3xf32>
}
