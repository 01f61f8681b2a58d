func.func @rms_norm_rank0(%x: tensor<f32>) -> tensor<f32> {
  %0 = "qkv.rms_norm"(%x) {eps = 1.0e-5 : f64} : (tensor<f32>) -> tensor<f32>
  return %0 : tensor<f32>
}
