func.func @block(%x: tensor<?x8xf32>, %w: tensor<8x8xf32>) -> tensor<?x8xf32> attributes {llvm.emit_c_interface} {
  %q = qkv.linear %x, %w : tensor<?x8xf32>, tensor<8x8xf32> -> tensor<?x8xf32>
  %a = qkv.attention %q, %q, %q : tensor<?x8xf32>, tensor<?x8xf32>, tensor<?x8xf32> -> tensor<?x8xf32>
    mask {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index):
      %c = arith.cmpi sge, %qi, %ki : index
      qkv.yield %c : i1
    }
  %n = qkv.rms_norm %a eps 0.000001 : tensor<?x8xf32> -> tensor<?x8xf32>
  return %n : tensor<?x8xf32>
}
