// qkv-lower-attention-to-gpu-tiles refuses dynamic head dims (the block's buffers have
// static sizes), naming them.
// RUN: qkv-opt %s --verify-diagnostics --pass-pipeline="builtin.module(qkv-lower-attention-to-gpu-tiles)" -o /dev/null

func.func @dynamic_head_dim(%q: tensor<1x1x?x?xf32>, %k: tensor<1x1x?x?xf32>, %v: tensor<1x1x?x?xf32>) -> tensor<1x1x?x?xf32> {
  // expected-error @+1 {{the CUDA attention kernel needs static head dims}}
  %0 = qkv.attention %q, %k, %v : tensor<1x1x?x?xf32>, tensor<1x1x?x?xf32>, tensor<1x1x?x?xf32> -> tensor<1x1x?x?xf32>
  return %0 : tensor<1x1x?x?xf32>
}
