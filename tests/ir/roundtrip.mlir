// Every qkv op prints in a form that parses back to the same IR: operands, attributes,
// types and mod regions. The generic form parses back to the same IR too.
// RUN: qkv-opt %s | qkv-opt | FileCheck %s
// RUN: qkv-opt %s --mlir-print-op-generic | qkv-opt | FileCheck %s
// RUN: qkv-opt %s | qkv-opt > %t.custom
// RUN: qkv-opt %s --mlir-print-op-generic | qkv-opt > %t.generic
// RUN: diff %t.custom %t.generic

// CHECK-LABEL: func.func @ops(
// CHECK-SAME: %[[X:arg0]]: tensor<?x6xf32>, %[[W:arg1]]: tensor<6x6xf32>, %[[B:arg2]]: tensor<6xf32>, %[[IDS:arg3]]: tensor<?xi32>, %[[TABLE:arg4]]: tensor<10x6xf32>, %[[E:arg5]]: tensor<3x?xf32>, %[[SLOPES:arg6]]: tensor<2xf32>)
func.func @ops(%x: tensor<?x6xf32>, %w: tensor<6x6xf32>, %b: tensor<6xf32>,
               %ids: tensor<?xi32>, %table: tensor<10x6xf32>, %e: tensor<3x?xf32>,
               %slopes: tensor<2xf32>) -> tensor<?x6xf32> {
  // CHECK: %[[MM:.*]] = qkv.matmul %[[X]], %[[W]] : (tensor<?x6xf32>, tensor<6x6xf32>) -> tensor<?x6xf32>
  %0 = qkv.matmul %x, %w : (tensor<?x6xf32>, tensor<6x6xf32>) -> tensor<?x6xf32>
  // CHECK: %[[LB:.*]] = qkv.linear %[[MM]], %[[W]] bias %[[B]] : tensor<?x6xf32>, tensor<6x6xf32>, tensor<6xf32> -> tensor<?x6xf32>
  %1 = qkv.linear %0, %w bias %b : tensor<?x6xf32>, tensor<6x6xf32>, tensor<6xf32> -> tensor<?x6xf32>
  // CHECK: %[[LIN:.*]] = qkv.linear %[[LB]], %[[W]] : tensor<?x6xf32>, tensor<6x6xf32> -> tensor<?x6xf32>
  %2 = qkv.linear %1, %w : tensor<?x6xf32>, tensor<6x6xf32> -> tensor<?x6xf32>
  // CHECK: qkv.transpose %[[LIN]] axes(0, -1) : tensor<?x6xf32> -> tensor<6x?xf32>
  %3 = qkv.transpose %2 axes(0, -1) : tensor<?x6xf32> -> tensor<6x?xf32>
  // CHECK: %[[SC:.*]] = qkv.scale %[[LIN]] by 1.250000e-01 : tensor<?x6xf32> -> tensor<?x6xf32>
  %4 = qkv.scale %2 by 0.125 : tensor<?x6xf32> -> tensor<?x6xf32>
  // CHECK: %[[ADD:.*]] = qkv.add %[[SC]], %[[B]] : (tensor<?x6xf32>, tensor<6xf32>) -> tensor<?x6xf32>
  %5 = qkv.add %4, %b : (tensor<?x6xf32>, tensor<6xf32>) -> tensor<?x6xf32>
  // CHECK: %[[SUB:.*]] = qkv.sub %[[ADD]], %[[SC]] : (tensor<?x6xf32>, tensor<?x6xf32>) -> tensor<?x6xf32>
  %6 = qkv.sub %5, %4 : (tensor<?x6xf32>, tensor<?x6xf32>) -> tensor<?x6xf32>
  // CHECK: %[[MUL:.*]] = qkv.mul %[[SUB]], %[[B]] : (tensor<?x6xf32>, tensor<6xf32>) -> tensor<?x6xf32>
  %7 = qkv.mul %6, %b : (tensor<?x6xf32>, tensor<6xf32>) -> tensor<?x6xf32>
  // CHECK: %[[DIV:.*]] = qkv.div %[[MUL]], %[[ADD]] : (tensor<?x6xf32>, tensor<?x6xf32>) -> tensor<?x6xf32>
  %8 = qkv.div %7, %5 : (tensor<?x6xf32>, tensor<?x6xf32>) -> tensor<?x6xf32>
  // CHECK: %[[SM:.*]] = qkv.softmax %[[DIV]] axis 1 : tensor<?x6xf32> -> tensor<?x6xf32>
  %9 = qkv.softmax %8 axis 1 : tensor<?x6xf32> -> tensor<?x6xf32>
  // CHECK: qkv.softmax %[[DIV]] axis -2 : tensor<?x6xf32> -> tensor<?x6xf32>
  %sm0 = qkv.softmax %8 axis -2 : tensor<?x6xf32> -> tensor<?x6xf32>
  // CHECK: %[[SPLIT:.*]] = qkv.split_heads %[[SM]] heads 2 : tensor<?x6xf32> -> tensor<2x?x3xf32>
  %10 = qkv.split_heads %9 heads 2 : tensor<?x6xf32> -> tensor<2x?x3xf32>
  // CHECK: %[[CAT:.*]] = qkv.concat %[[SPLIT]], %[[SPLIT]] axis 2 : (tensor<2x?x3xf32>, tensor<2x?x3xf32>) -> tensor<2x?x6xf32>
  %q4 = qkv.concat %10, %10 axis 2 : (tensor<2x?x3xf32>, tensor<2x?x3xf32>) -> tensor<2x?x6xf32>
  // CHECK: qkv.concat %[[X]], %[[SM]], %[[X]] axis 0 : (tensor<?x6xf32>, tensor<?x6xf32>, tensor<?x6xf32>) -> tensor<?x6xf32>
  %cat3 = qkv.concat %x, %9, %x axis 0 : (tensor<?x6xf32>, tensor<?x6xf32>, tensor<?x6xf32>) -> tensor<?x6xf32>
  // CHECK: %[[ONE:.*]] = qkv.split_heads %[[X]] heads 1 : tensor<?x6xf32> -> tensor<1x?x6xf32>
  %rope_in = qkv.split_heads %x heads 1 : tensor<?x6xf32> -> tensor<1x?x6xf32>
  // CHECK: %[[ROPE:.*]] = qkv.rope %[[CAT]] base 1.000000e+04 offset 3 interleaved : tensor<2x?x6xf32> -> tensor<2x?x6xf32>
  %11 = qkv.rope %q4 base 10000.0 offset 3 interleaved : tensor<2x?x6xf32> -> tensor<2x?x6xf32>
  // CHECK: %[[ROPE1:.*]] = qkv.rope %[[ONE]] base 5.000000e+02 offset 0 : tensor<1x?x6xf32> -> tensor<1x?x6xf32>
  %12 = qkv.rope %rope_in base 500.0 offset 0 : tensor<1x?x6xf32> -> tensor<1x?x6xf32>
  // Both regions, with their captures: the block arguments and every op of the bodies.
  // CHECK: %[[ATT:.*]] = qkv.attention %[[ROPE]], %[[ROPE]], %[[ROPE]] scale 5.000000e-01 captures(%[[SLOPES]] : tensor<2xf32>) : tensor<2x?x6xf32>, tensor<2x?x6xf32>, tensor<2x?x6xf32> -> tensor<2x?x6xf32> score {
  // CHECK-NEXT: ^bb0(%[[S:[a-z0-9_]+]]: f32, %{{[a-z0-9_]+}}: index, %[[H:[a-z0-9_]+]]: index, %[[QI:[a-z0-9_]+]]: index, %[[KV:[a-z0-9_]+]]: index, %{{[a-z0-9_]+}}: index, %{{[a-z0-9_]+}}: index, %[[SL:[a-z0-9_]+]]: tensor<2xf32>):
  // CHECK-NEXT: %[[SLOPE:.*]] = tensor.extract %[[SL]][%[[H]]] : tensor<2xf32>
  // CHECK-NEXT: %[[D:.*]] = arith.subi %[[KV]], %[[QI]] : index
  // CHECK-NEXT: %[[DI:.*]] = arith.index_cast %[[D]] : index to i64
  // CHECK-NEXT: %[[DF:.*]] = arith.sitofp %[[DI]] : i64 to f32
  // CHECK-NEXT: %[[P:.*]] = arith.mulf %[[SLOPE]], %[[DF]] : f32
  // CHECK-NEXT: %[[N:.*]] = arith.addf %[[S]], %[[P]] : f32
  // CHECK-NEXT: qkv.yield %[[N]] : f32
  // CHECK-NEXT: } mask {
  // CHECK-NEXT: ^bb0(%{{[a-z0-9_]+}}: index, %{{[a-z0-9_]+}}: index, %[[MQ:[a-z0-9_]+]]: index, %[[MK:[a-z0-9_]+]]: index, %[[LQ:[a-z0-9_]+]]: index, %[[LK:[a-z0-9_]+]]: index, %{{[a-z0-9_]+}}: tensor<2xf32>):
  // CHECK-NEXT: %[[OFF:.*]] = arith.subi %[[LK]], %[[LQ]] : index
  // CHECK-NEXT: %[[QS:.*]] = arith.addi %[[MQ]], %[[OFF]] : index
  // CHECK-NEXT: %[[C:.*]] = arith.cmpi sge, %[[QS]], %[[MK]] : index
  // CHECK-NEXT: qkv.yield %[[C]] : i1
  // CHECK-NEXT: }
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
        %off = arith.subi %lk, %lq : index
        %qs = arith.addi %qi, %off : index
        %c = arith.cmpi sge, %qs, %kv : index
        qkv.yield %c : i1
      }
  // No scale, no captures, no regions.
  // CHECK: %[[ATT2:.*]] = qkv.attention %[[ATT]], %[[ROPE]], %[[ROPE]] : tensor<2x?x6xf32>, tensor<2x?x6xf32>, tensor<2x?x6xf32> -> tensor<2x?x6xf32>{{$}}
  %14 = qkv.attention %13, %11, %11 : tensor<2x?x6xf32>, tensor<2x?x6xf32>, tensor<2x?x6xf32> -> tensor<2x?x6xf32>
  // A mask alone, on GQA heads (2 query heads, 1 kv head), rank 2 q/k/v.
  // CHECK: qkv.attention %[[ROPE]], %[[ROPE1]], %[[ROPE1]] : tensor<2x?x6xf32>, tensor<1x?x6xf32>, tensor<1x?x6xf32> -> tensor<2x?x6xf32> mask {
  // CHECK-NEXT: ^bb0(%{{[a-z0-9_]+}}: index, %{{[a-z0-9_]+}}: index, %[[GQ:[a-z0-9_]+]]: index, %[[GK:[a-z0-9_]+]]: index, %{{[a-z0-9_]+}}: index, %{{[a-z0-9_]+}}: index):
  // CHECK-NEXT: %[[GC:.*]] = arith.cmpi eq, %[[GQ]], %[[GK]] : index
  // CHECK-NEXT: qkv.yield %[[GC]] : i1
  %gqa = qkv.attention %11, %12, %12 : tensor<2x?x6xf32>, tensor<1x?x6xf32>, tensor<1x?x6xf32> -> tensor<2x?x6xf32> mask {
  ^bb0(%bi: index, %h: index, %qi: index, %kv: index, %lq: index, %lk: index):
    %c = arith.cmpi eq, %qi, %kv : index
    qkv.yield %c : i1
  }
  // CHECK: %[[MERGED:.*]] = qkv.merge_heads %[[ATT2]] : tensor<2x?x6xf32> -> tensor<?x12xf32>
  %15 = qkv.merge_heads %14 : tensor<2x?x6xf32> -> tensor<?x12xf32>
  // CHECK: %[[LN:.*]] = qkv.layer_norm %[[X]] gamma %[[B]] : tensor<6xf32> beta %[[B]] : tensor<6xf32> eps 1.000000e-05 : tensor<?x6xf32> -> tensor<?x6xf32>
  %16 = qkv.layer_norm %x gamma %b : tensor<6xf32> beta %b : tensor<6xf32> eps 0.00001 : tensor<?x6xf32> -> tensor<?x6xf32>
  // CHECK: qkv.layer_norm %[[X]] eps 1.000000e-03 : tensor<?x6xf32> -> tensor<?x6xf32>
  %ln0 = qkv.layer_norm %x eps 0.001 : tensor<?x6xf32> -> tensor<?x6xf32>
  // CHECK: qkv.layer_norm %[[X]] gamma %[[B]] : tensor<6xf32> eps 1.000000e-03 : tensor<?x6xf32> -> tensor<?x6xf32>
  %ln1 = qkv.layer_norm %x gamma %b : tensor<6xf32> eps 0.001 : tensor<?x6xf32> -> tensor<?x6xf32>
  // CHECK: %[[RMS:.*]] = qkv.rms_norm %[[LN]] eps 9.9999999999999995E-7 : tensor<?x6xf32> -> tensor<?x6xf32>
  %17 = qkv.rms_norm %16 eps 0.000001 : tensor<?x6xf32> -> tensor<?x6xf32>
  // CHECK: qkv.rms_norm %[[X]] gamma %[[B]] : tensor<6xf32> eps 1.000000e-02 : tensor<?x6xf32> -> tensor<?x6xf32>
  %rms1 = qkv.rms_norm %x gamma %b : tensor<6xf32> eps 0.01 : tensor<?x6xf32> -> tensor<?x6xf32>
  // CHECK: %[[GELU:.*]] = qkv.gelu %[[RMS]] approximate : tensor<?x6xf32> -> tensor<?x6xf32>
  %18 = qkv.gelu %17 approximate : tensor<?x6xf32> -> tensor<?x6xf32>
  // CHECK: qkv.gelu %[[RMS]] : tensor<?x6xf32> -> tensor<?x6xf32>
  %gelu_exact = qkv.gelu %17 : tensor<?x6xf32> -> tensor<?x6xf32>
  // CHECK: %[[SILU:.*]] = qkv.silu %[[GELU]] : tensor<?x6xf32> -> tensor<?x6xf32>
  %19 = qkv.silu %18 : tensor<?x6xf32> -> tensor<?x6xf32>
  // CHECK: %[[ELU:.*]] = qkv.elu %[[SILU]] alpha 7.500000e-01 : tensor<?x6xf32> -> tensor<?x6xf32>
  %20 = qkv.elu %19 alpha 0.75 : tensor<?x6xf32> -> tensor<?x6xf32>
  // CHECK: qkv.softcap %[[ELU]] cap 3.000000e+01 : tensor<?x6xf32> -> tensor<?x6xf32>
  %softcap = qkv.softcap %20 cap 30.0 : tensor<?x6xf32> -> tensor<?x6xf32>
  // CHECK: qkv.softplus %[[ELU]] : tensor<?x6xf32> -> tensor<?x6xf32>
  %softplus = qkv.softplus %20 : tensor<?x6xf32> -> tensor<?x6xf32>
  // CHECK: qkv.sigmoid %[[ELU]] : tensor<?x6xf32> -> tensor<?x6xf32>
  %sigmoid = qkv.sigmoid %20 : tensor<?x6xf32> -> tensor<?x6xf32>
  // CHECK: qkv.relu %[[ELU]] : tensor<?x6xf32> -> tensor<?x6xf32>
  %relu = qkv.relu %20 : tensor<?x6xf32> -> tensor<?x6xf32>
  // CHECK: qkv.swiglu %[[ELU]], %[[SILU]] : (tensor<?x6xf32>, tensor<?x6xf32>) -> tensor<?x6xf32>
  %21 = qkv.swiglu %20, %19 : (tensor<?x6xf32>, tensor<?x6xf32>) -> tensor<?x6xf32>
  // CHECK: qkv.geglu %[[ELU]], %[[SILU]] : (tensor<?x6xf32>, tensor<?x6xf32>) -> tensor<?x6xf32>
  %geglu = qkv.geglu %20, %19 : (tensor<?x6xf32>, tensor<?x6xf32>) -> tensor<?x6xf32>
  // CHECK: %[[EMB:.*]] = qkv.embedding %[[TABLE]][%[[IDS]]] : (tensor<?xi32>, tensor<10x6xf32>) -> tensor<?x6xf32>
  %22 = qkv.embedding %table[%ids] : (tensor<?xi32>, tensor<10x6xf32>) -> tensor<?x6xf32>
  // CHECK: %[[PE:.*]] = qkv.sinusoidal_pe %[[EMB]] base 1.000000e+04 offset 2 : tensor<?x6xf32> -> tensor<?x6xf32>
  %23 = qkv.sinusoidal_pe %22 base 10000.0 offset 2 : tensor<?x6xf32> -> tensor<?x6xf32>
  // CHECK: %[[MASKED:.*]] = qkv.mask %[[PE]] : tensor<?x6xf32> -> tensor<?x6xf32> {
  // CHECK-NEXT: ^bb0(%{{[a-z0-9_]+}}: index, %{{[a-z0-9_]+}}: index, %[[Q1:[a-z0-9_]+]]: index, %[[K1:[a-z0-9_]+]]: index, %{{[a-z0-9_]+}}: index, %{{[a-z0-9_]+}}: index):
  // CHECK-NEXT: %[[C1:.*]] = arith.cmpi sge, %[[Q1]], %[[K1]] : index
  // CHECK-NEXT: qkv.yield %[[C1]] : i1
  %24 = qkv.mask %23 : tensor<?x6xf32> -> tensor<?x6xf32> {
  ^bb0(%bi: index, %h: index, %qi: index, %kv: index, %lq: index, %lk: index):
    %c = arith.cmpi sge, %qi, %kv : index
    qkv.yield %c : i1
  }
  // CHECK: %[[MOD:.*]] = qkv.score_mod %[[MASKED]] captures(%[[SLOPES]] : tensor<2xf32>) : tensor<?x6xf32> -> tensor<?x6xf32> {
  // CHECK-NEXT: ^bb0(%[[S2:[a-z0-9_]+]]: f32, %{{[a-z0-9_]+}}: index, %[[H2:[a-z0-9_]+]]: index, %{{[a-z0-9_]+}}: index, %{{[a-z0-9_]+}}: index, %{{[a-z0-9_]+}}: index, %{{[a-z0-9_]+}}: index, %[[SL2:[a-z0-9_]+]]: tensor<2xf32>):
  // CHECK-NEXT: %[[SLOPE2:.*]] = tensor.extract %[[SL2]][%[[H2]]] : tensor<2xf32>
  // CHECK-NEXT: %[[T:.*]] = math.tanh %[[S2]] : f32
  // CHECK-NEXT: %[[R:.*]] = arith.mulf %[[T]], %[[SLOPE2]] : f32
  // CHECK-NEXT: qkv.yield %[[R]] : f32
  %25 = qkv.score_mod %24 captures(%slopes : tensor<2xf32>) : tensor<?x6xf32> -> tensor<?x6xf32> {
  ^bb0(%s: f32, %bi: index, %h: index, %qi: index, %kv: index, %lq: index, %lk: index, %sl: tensor<2xf32>):
    %slope = tensor.extract %sl[%h] : tensor<2xf32>
    %t = math.tanh %s : f32
    %r = arith.mulf %t, %slope : f32
    qkv.yield %r : f32
  }
  // CHECK: qkv.linformer_project %[[ATT2]], %[[E]] : (tensor<2x?x6xf32>, tensor<3x?xf32>) -> tensor<2x3x6xf32>
  %26 = qkv.linformer_project %14, %e : (tensor<2x?x6xf32>, tensor<3x?xf32>) -> tensor<2x3x6xf32>
  // CHECK: qkv.linear_attention %[[ROPE]], %[[ROPE]], %[[ROPE]] feature_map "elu_plus_one" : tensor<2x?x6xf32>, tensor<2x?x6xf32>, tensor<2x?x6xf32> -> tensor<2x?x6xf32>
  %27 = qkv.linear_attention %11, %11, %11 feature_map "elu_plus_one" : tensor<2x?x6xf32>, tensor<2x?x6xf32>, tensor<2x?x6xf32> -> tensor<2x?x6xf32>
  // CHECK: qkv.linear_attention %[[ROPE]], %[[ROPE1]], %[[ROPE1]] feature_map "relu" : tensor<2x?x6xf32>, tensor<1x?x6xf32>, tensor<1x?x6xf32> -> tensor<2x?x6xf32>
  %28 = qkv.linear_attention %11, %12, %12 feature_map "relu" : tensor<2x?x6xf32>, tensor<1x?x6xf32>, tensor<1x?x6xf32> -> tensor<2x?x6xf32>
  // CHECK: return %[[MOD]] : tensor<?x6xf32>
  return %25 : tensor<?x6xf32>
}

// f64, and the integer ids of an embedding in i64.
// CHECK-LABEL: func.func @f64(
// CHECK-SAME: %[[X:arg0]]: tensor<4x?xf64>, %[[IDS:arg1]]: tensor<?x?xi64>, %[[T:arg2]]: tensor<7x4xf64>)
// CHECK: %[[G:.*]] = qkv.embedding %[[T]][%[[IDS]]] : (tensor<?x?xi64>, tensor<7x4xf64>) -> tensor<?x?x4xf64>
// CHECK: qkv.softmax %[[X]] axis 0 : tensor<4x?xf64> -> tensor<4x?xf64>
// CHECK: return %[[G]] : tensor<?x?x4xf64>
func.func @f64(%x: tensor<4x?xf64>, %ids: tensor<?x?xi64>, %t: tensor<7x4xf64>) -> tensor<?x?x4xf64> {
  %0 = qkv.embedding %t[%ids] : (tensor<?x?xi64>, tensor<7x4xf64>) -> tensor<?x?x4xf64>
  %1 = qkv.softmax %x axis 0 : tensor<4x?xf64> -> tensor<4x?xf64>
  return %0 : tensor<?x?x4xf64>
}

// A bf16 projection as import writes it: x and the weight read as stored, the bias and
// the result at the compute width (f32); the verifier takes the operands as widened.
// CHECK-LABEL: func.func @bf16_linear(
// CHECK: qkv.linear %arg0, %arg1 bias %arg2 : tensor<?x4xbf16>, tensor<4x3xbf16>, tensor<3xf32> -> tensor<?x3xf32>
func.func @bf16_linear(%x: tensor<?x4xbf16>, %w: tensor<4x3xbf16>, %b: tensor<3xf32>) -> tensor<?x3xf32> {
  %0 = qkv.linear %x, %w bias %b : tensor<?x4xbf16>, tensor<4x3xbf16>, tensor<3xf32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

// KV caches read in place, and RoPE at explicit positions.
// CHECK-LABEL: func.func @caches(
// CHECK-SAME: %[[PAST:arg0]]: tensor<2x2x16x8xf32>, %[[LEN:arg1]]: tensor<2xi64>, %[[NEW:arg2]]: tensor<2x2x?x8xf32>, %[[POOL:arg3]]: tensor<?x2x4x8xf32>, %[[TAB:arg4]]: tensor<2x3xi32>, %[[POS:arg5]]: tensor<2x?xi64>)
// CHECK: %[[V:.*]] = qkv.cache_view %[[PAST]][%[[LEN]]], %[[NEW]] : (tensor<2x2x16x8xf32>, tensor<2xi64>, tensor<2x2x?x8xf32>) -> tensor<2x2x?x8xf32>
// CHECK: %[[P:.*]] = qkv.paged_cache_view %[[POOL]][%[[TAB]], %[[LEN]]], %[[NEW]] : (tensor<?x2x4x8xf32>, tensor<2x3xi32>, tensor<2xi64>, tensor<2x2x?x8xf32>) -> tensor<2x2x?x8xf32>
// CHECK: %[[R:.*]] = qkv.rope %[[NEW]] positions %[[POS]] : tensor<2x?xi64> base 1.000000e+04 offset 0 : tensor<2x2x?x8xf32> -> tensor<2x2x?x8xf32>
// CHECK: return %[[V]], %[[P]], %[[R]]
func.func @caches(%past: tensor<2x2x16x8xf32>, %len: tensor<2xi64>, %new: tensor<2x2x?x8xf32>,
                  %pool: tensor<?x2x4x8xf32>, %table: tensor<2x3xi32>, %pos: tensor<2x?xi64>)
    -> (tensor<2x2x?x8xf32>, tensor<2x2x?x8xf32>, tensor<2x2x?x8xf32>) {
  %0 = qkv.cache_view %past[%len], %new : (tensor<2x2x16x8xf32>, tensor<2xi64>, tensor<2x2x?x8xf32>) -> tensor<2x2x?x8xf32>
  %1 = qkv.paged_cache_view %pool[%table, %len], %new : (tensor<?x2x4x8xf32>, tensor<2x3xi32>, tensor<2xi64>, tensor<2x2x?x8xf32>) -> tensor<2x2x?x8xf32>
  %2 = qkv.rope %new positions %pos : tensor<2x?xi64> base 10000.0 offset 0 : tensor<2x2x?x8xf32> -> tensor<2x2x?x8xf32>
  return %0, %1, %2 : tensor<2x2x?x8xf32>, tensor<2x2x?x8xf32>, tensor<2x2x?x8xf32>
}

// Partial attention: an attention's log-sum-exp as its second result, and two partials
// merged.
// CHECK-LABEL: func.func @partials(
// CHECK: %[[A:.*]]:2 = qkv.attention %arg0, %arg1, %arg1 : tensor<2x?x8xf32>, tensor<2x?x8xf32>, tensor<2x?x8xf32> -> tensor<2x?x8xf32> lse tensor<2x?xf32> mask {
// CHECK: %[[B:.*]]:2 = qkv.attention %arg0, %arg2, %arg2 : tensor<2x?x8xf32>, tensor<2x?x8xf32>, tensor<2x?x8xf32> -> tensor<2x?x8xf32> lse tensor<2x?xf32>{{$}}
// CHECK: %[[O:.*]] = qkv.merge_attention %[[A]]#0, %[[A]]#1, %[[B]]#0, %[[B]]#1 : tensor<2x?x8xf32>, tensor<2x?xf32>
// CHECK: %[[L:.*]] = qkv.merge_lse %[[A]]#1, %[[B]]#1 : (tensor<2x?xf32>, tensor<2x?xf32>) -> tensor<2x?xf32>
// CHECK: return %[[O]], %[[L]]
func.func @partials(%q: tensor<2x?x8xf32>, %k1: tensor<2x?x8xf32>, %k2: tensor<2x?x8xf32>)
    -> (tensor<2x?x8xf32>, tensor<2x?xf32>) {
  %a:2 = qkv.attention %q, %k1, %k1 : tensor<2x?x8xf32>, tensor<2x?x8xf32>, tensor<2x?x8xf32> -> tensor<2x?x8xf32> lse tensor<2x?xf32> mask {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index):
    %c = arith.cmpi uge, %qi, %ki : index
    qkv.yield %c : i1
  }
  %b:2 = qkv.attention %q, %k2, %k2 : tensor<2x?x8xf32>, tensor<2x?x8xf32>, tensor<2x?x8xf32> -> tensor<2x?x8xf32> lse tensor<2x?xf32>
  %o = qkv.merge_attention %a#0, %a#1, %b#0, %b#1 : tensor<2x?x8xf32>, tensor<2x?xf32>
  %l = qkv.merge_lse %a#1, %b#1 : (tensor<2x?xf32>, tensor<2x?xf32>) -> tensor<2x?xf32>
  return %o, %l : tensor<2x?x8xf32>, tensor<2x?xf32>
}
