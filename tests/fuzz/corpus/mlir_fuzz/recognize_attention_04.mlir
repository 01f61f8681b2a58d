func.func @mask_then_score_mod(%q: tensor<?x6xf32>, %k: tensor<?x6xf32>, %v: tensor<?x6xf32>) -> tensor<?x6xf32> {
  %kt = qkv.transpose %k axes(0, 1) : tensor<?x6xf32> -> tensor<6x?xf32>
  %s = qkv.matmul %q, %kt : (tensor<?x6xf32>, tensor<6x?xf32>) -> tensor<?x?xf32>
  %m = qkv.mask %s : tensor<?x?xf32> -> tensor<?x?xf32> {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index):
    %c = arith.cmpi sge, %qi, %ki : index
    qkv.yield %c : i1
  }
  %sm = qkv.score_mod %m : tensor<?x?xf32> -> tensor<?x?xf32> {
  ^bb0(%x: f32, %b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index):
    %c1 = arith.constant 1.0 : f32
    %y = arith.addf %x, %c1 : f32
    qkv.yield %y : f32
  }
  %p = qkv.softmax %sm axis 1 : tensor<?x?xf32> -> tensor<?x?xf32>
  %o = qkv.matmul %p, %v : (tensor<?x?xf32>, tensor<?x6xf32>) -> tensor<?x6xf32>
  return %o : tensor<?x6xf32>
}
