func.func @concat_empty() -> tensor<4x2xf32> {
  %0 = "qkv.concat"() {axis = 0 : i64} : () -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}
