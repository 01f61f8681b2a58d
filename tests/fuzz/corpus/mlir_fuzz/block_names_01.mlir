func.func @named(%q: tensor<?x4xf32>, %doc: tensor<?xi32> {qkv.name = "doc"}, %slopes: tensor<2xf32>) -> (tensor<?x4xf32>, tensor<?x?xf32>) {
  %0 = qkv.attention %q, %q, %q captures(%doc, %slopes : tensor<?xi32>, tensor<2xf32>) : tensor<?x4xf32>, tensor<?x4xf32>, tensor<?x4xf32> -> tensor<?x4xf32> score {
  ^bb0(%s: f32, %x0: index, %x1: index, %x2: index, %x3: index, %x4: index, %x5: index, %d: tensor<?xi32>, %sl: tensor<2xf32>):
    qkv.yield %s : f32
  } mask {
  ^bb0(%x0: index, %x1: index, %x2: index, %x3: index, %x4: index, %x5: index, %d: tensor<?xi32>, %sl: tensor<2xf32>):
    %a = tensor.extract %d[%x2] : tensor<?xi32>
    %c = tensor.extract %d[%x3] : tensor<?xi32>
    %e = arith.cmpi eq, %a, %c : i32
    qkv.yield %e : i1
  }
  %s = qkv.matmul %q, %q : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x?xf32>
  %m = qkv.mask %s : tensor<?x?xf32> -> tensor<?x?xf32> {
  ^bb0(%x0: index, %x1: index, %x2: index, %x3: index, %x4: index, %x5: index):
    %c = arith.cmpi sge, %x2, %x3 : index
    qkv.yield %c : i1
  }
  return %0, %m : tensor<?x4xf32>, tensor<?x?xf32>
}
