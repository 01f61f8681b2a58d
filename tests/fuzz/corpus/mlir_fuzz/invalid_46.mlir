func.func @linformer_ranks(%x: tensor<2x?x4xf32>, %e: tensor<3x?x1xf32>) -> tensor<2x3x4xf32> {
  %0 = qkv.linformer_project %x, %e : (tensor<2x?x4xf32>, tensor<3x?x1xf32>) -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}
