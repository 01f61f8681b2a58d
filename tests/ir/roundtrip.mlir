// Every qkv op prints in a form that parses back to the same IR.
// RUN: qkv-opt %s | qkv-opt | FileCheck %s
// RUN: qkv-opt %s --mlir-print-op-generic | qkv-opt | FileCheck %s

// CHECK-LABEL: func.func @ops
func.func @ops(%x: tensor<?x6xf32>, %w: tensor<6x6xf32>, %b: tensor<6xf32>,
               %ids: tensor<?xi32>, %table: tensor<10x6xf32>, %e: tensor<3x?xf32>,
               %slopes: tensor<2xf32>) -> tensor<?x6xf32> {
  // CHECK: qkv.matmul %{{.*}}, %{{.*}} : (tensor<?x6xf32>, tensor<6x6xf32>) -> tensor<?x6xf32>
  %0 = qkv.matmul %x, %w : (tensor<?x6xf32>, tensor<6x6xf32>) -> tensor<?x6xf32>
  // CHECK: qkv.linear %{{.*}}, %{{.*}} bias %{{.*}} : tensor<?x6xf32>, tensor<6x6xf32>, tensor<6xf32> -> tensor<?x6xf32>
  %1 = qkv.linear %0, %w bias %b : tensor<?x6xf32>, tensor<6x6xf32>, tensor<6xf32> -> tensor<?x6xf32>
  // CHECK: qkv.linear %{{.*}}, %{{.*}} : tensor<?x6xf32>, tensor<6x6xf32> -> tensor<?x6xf32>
  %2 = qkv.linear %1, %w : tensor<?x6xf32>, tensor<6x6xf32> -> tensor<?x6xf32>
  // CHECK: qkv.transpose %{{.*}} axes(0, 1) : tensor<?x6xf32> -> tensor<6x?xf32>
  %3 = qkv.transpose %2 axes(0, 1) : tensor<?x6xf32> -> tensor<6x?xf32>
  // CHECK: qkv.scale %{{.*}} by 1.250000e-01 : tensor<?x6xf32> -> tensor<?x6xf32>
  %4 = qkv.scale %2 by 0.125 : tensor<?x6xf32> -> tensor<?x6xf32>
  // CHECK: qkv.add
  %5 = qkv.add %4, %b : (tensor<?x6xf32>, tensor<6xf32>) -> tensor<?x6xf32>
  // CHECK: qkv.sub
  %6 = qkv.sub %5, %4 : (tensor<?x6xf32>, tensor<?x6xf32>) -> tensor<?x6xf32>
  // CHECK: qkv.mul
  %7 = qkv.mul %6, %b : (tensor<?x6xf32>, tensor<6xf32>) -> tensor<?x6xf32>
  // CHECK: qkv.div
  %8 = qkv.div %7, %5 : (tensor<?x6xf32>, tensor<?x6xf32>) -> tensor<?x6xf32>
  // CHECK: qkv.softmax %{{.*}} axis 1 : tensor<?x6xf32> -> tensor<?x6xf32>
  %9 = qkv.softmax %8 axis 1 : tensor<?x6xf32> -> tensor<?x6xf32>
  // CHECK: qkv.split_heads %{{.*}} heads 2 : tensor<?x6xf32> -> tensor<2x?x3xf32>
  %10 = qkv.split_heads %9 heads 2 : tensor<?x6xf32> -> tensor<2x?x3xf32>
  %r = qkv.split_heads %x heads 3 : tensor<?x6xf32> -> tensor<3x?x2xf32>
  %q4 = qkv.concat %10, %10 axis 2 : (tensor<2x?x3xf32>, tensor<2x?x3xf32>) -> tensor<2x?x6xf32>
  %rope_in = qkv.split_heads %x heads 1 : tensor<?x6xf32> -> tensor<1x?x6xf32>
  // CHECK: qkv.rope %{{.*}} base 1.000000e+04 offset 3 interleaved : tensor<2x?x6xf32>
  %11 = qkv.rope %q4 base 10000.0 offset 3 interleaved : tensor<2x?x6xf32> -> tensor<2x?x6xf32>
  // CHECK: qkv.rope %{{.*}} base 5.000000e+02 offset 0 : tensor<1x?x6xf32>
  %12 = qkv.rope %rope_in base 500.0 offset 0 : tensor<1x?x6xf32> -> tensor<1x?x6xf32>
  // CHECK: qkv.attention %{{.*}}, %{{.*}}, %{{.*}} scale 5.000000e-01 captures(%{{.*}} : tensor<2xf32>) : tensor<2x?x6xf32>, tensor<2x?x6xf32>, tensor<2x?x6xf32> -> tensor<2x?x6xf32> score {
  // CHECK: ^bb0(%{{.*}}: f32, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: tensor<2xf32>):
  // CHECK: qkv.yield %{{.*}} : f32
  // CHECK: } mask {
  // CHECK: qkv.yield %{{.*}} : i1
  %13 = qkv.attention %11, %11, %11 scale 0.5 captures(%slopes : tensor<2xf32>)
      : tensor<2x?x6xf32>, tensor<2x?x6xf32>, tensor<2x?x6xf32> -> tensor<2x?x6xf32>
      score {
      ^bb0(%s: f32, %bi: index, %h: index, %qi: index, %kv: index, %lq: index, %lk: index, %sl: tensor<2xf32>):
        %slope = tensor.extract %sl[%h] : tensor<2xf32>
        %d = arith.subi %kv, %qi : index
        %di = arith.index_cast %d : index to i64
        %df = arith.sitofp %di : i64 to f32
        %m = arith.mulf %slope, %df : f32
        %n = arith.addf %s, %m : f32
        qkv.yield %n : f32
      } mask {
      ^bb0(%bi: index, %h: index, %qi: index, %kv: index, %lq: index, %lk: index, %sl: tensor<2xf32>):
        %c = arith.cmpi sge, %qi, %kv : index
        qkv.yield %c : i1
      }
  // CHECK: qkv.attention %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x?x6xf32>
  %14 = qkv.attention %13, %11, %11 : tensor<2x?x6xf32>, tensor<2x?x6xf32>, tensor<2x?x6xf32> -> tensor<2x?x6xf32>
  // CHECK: qkv.merge_heads %{{.*}} : tensor<2x?x6xf32> -> tensor<?x12xf32>
  %15 = qkv.merge_heads %14 : tensor<2x?x6xf32> -> tensor<?x12xf32>
  // CHECK: qkv.layer_norm %{{.*}} gamma %{{.*}} : tensor<6xf32> beta %{{.*}} : tensor<6xf32> eps 1.000000e-05 : tensor<?x6xf32> -> tensor<?x6xf32>
  %16 = qkv.layer_norm %x gamma %b : tensor<6xf32> beta %b : tensor<6xf32> eps 0.00001 : tensor<?x6xf32> -> tensor<?x6xf32>
  // CHECK: qkv.rms_norm %{{.*}} eps 9.9999999999999995E-7 : tensor<?x6xf32> -> tensor<?x6xf32>
  %17 = qkv.rms_norm %16 eps 0.000001 : tensor<?x6xf32> -> tensor<?x6xf32>
  // CHECK: qkv.gelu %{{.*}} approximate : tensor<?x6xf32> -> tensor<?x6xf32>
  %18 = qkv.gelu %17 approximate : tensor<?x6xf32> -> tensor<?x6xf32>
  // CHECK: qkv.silu
  %19 = qkv.silu %18 : tensor<?x6xf32> -> tensor<?x6xf32>
  // CHECK: qkv.elu %{{.*}} alpha 1.000000e+00
  %20 = qkv.elu %19 alpha 1.0 : tensor<?x6xf32> -> tensor<?x6xf32>
  // CHECK: qkv.swiglu
  %21 = qkv.swiglu %20, %19 : (tensor<?x6xf32>, tensor<?x6xf32>) -> tensor<?x6xf32>
  // CHECK: qkv.embedding %{{.*}}[%{{.*}}] : (tensor<?xi32>, tensor<10x6xf32>) -> tensor<?x6xf32>
  %22 = qkv.embedding %table[%ids] : (tensor<?xi32>, tensor<10x6xf32>) -> tensor<?x6xf32>
  // CHECK: qkv.sinusoidal_pe %{{.*}} base 1.000000e+04 offset 0
  %23 = qkv.sinusoidal_pe %22 base 10000.0 offset 0 : tensor<?x6xf32> -> tensor<?x6xf32>
  // CHECK: qkv.mask %{{.*}} : tensor<?x6xf32> -> tensor<?x6xf32>
  %24 = qkv.mask %23 : tensor<?x6xf32> -> tensor<?x6xf32> {
  ^bb0(%bi: index, %h: index, %qi: index, %kv: index, %lq: index, %lk: index):
    %c = arith.cmpi sge, %qi, %kv : index
    qkv.yield %c : i1
  }
  // CHECK: qkv.score_mod %{{.*}} captures(%{{.*}} : tensor<2xf32>) : tensor<?x6xf32> -> tensor<?x6xf32>
  %25 = qkv.score_mod %24 captures(%slopes : tensor<2xf32>) : tensor<?x6xf32> -> tensor<?x6xf32> {
  ^bb0(%s: f32, %bi: index, %h: index, %qi: index, %kv: index, %lq: index, %lk: index, %sl: tensor<2xf32>):
    %t = math.tanh %s : f32
    qkv.yield %t : f32
  }
  // CHECK: qkv.linformer_project %{{.*}}, %{{.*}} : (tensor<2x?x6xf32>, tensor<3x?xf32>) -> tensor<2x3x6xf32>
  %26 = qkv.linformer_project %14, %e : (tensor<2x?x6xf32>, tensor<3x?xf32>) -> tensor<2x3x6xf32>
  // CHECK: qkv.linear_attention %{{.*}}, %{{.*}}, %{{.*}} feature_map "elu_plus_one"
  %27 = qkv.linear_attention %11, %11, %11 feature_map "elu_plus_one" : tensor<2x?x6xf32>, tensor<2x?x6xf32>, tensor<2x?x6xf32> -> tensor<2x?x6xf32>
  return %25 : tensor<?x6xf32>
}
