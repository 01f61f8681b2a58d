func.func @linformer_seq(%x: tensor<2x7x4xf32>, %e: tensor<3x8xf32>) -> tensor<2x3x4xf32> {
  %0 = qkv.linformer_project %x, %e : (tensor<2x7x4xf32>, tensor<3x8xf32>) -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}
