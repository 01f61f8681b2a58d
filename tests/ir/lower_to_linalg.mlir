// qkv-lower-to-linalg: qkv ops become linalg on tensors; positions come from linalg.index.
// RUN: qkv-opt %s --pass-pipeline="builtin.module(func.func(qkv-lower-to-linalg))" | FileCheck %s
// RUN: qkv-opt %s --pass-pipeline="builtin.module(func.func(qkv-lower-to-linalg))" | FileCheck %s --check-prefix=NOQKV
// RUN: qkv-opt %s --pass-pipeline="builtin.module(func.func(qkv-lower-to-linalg),cse)" | FileCheck %s --check-prefix=CSE

// No qkv op is left anywhere in the output.
// NOQKV-NOT: qkv.

// CHECK-DAG: #[[A:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
// CHECK-DAG: #[[B:.*]] = affine_map<(d0, d1, d2, d3) -> (d3, d2)>
// CHECK-DAG: #[[O:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>

// Softmax: max, then sum of exp(x - max'), then normalise; max' = 0 for an all -inf row
// and a zero sum gives 0, so a fully masked row is 0, not NaN. Each exp takes x minus
// the (safe) max: without the subtraction, exp overflows for scores past 88.
// CHECK-LABEL: func.func @softmax
// CHECK-SAME: (%[[X:arg0]]: tensor<?x5xf32>)
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG: %[[NINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK: %[[INIT:.*]] = linalg.fill ins(%[[NINF]] : f32)
// CHECK: %[[MAX:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[X]] : tensor<?x5xf32>) outs(%[[INIT]] : tensor<?xf32>)
// CHECK-NEXT: ^bb0(%[[A0:[a-z0-9_]+]]: f32, %[[M0:[a-z0-9_]+]]: f32):
// CHECK-NEXT: %[[MX:.*]] = arith.maximumf %[[A0]], %[[M0]] : f32
// CHECK-NEXT: linalg.yield %[[MX]] : f32
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[X]], %[[MAX]] : tensor<?x5xf32>, tensor<?xf32>)
// CHECK-NEXT: ^bb0(%[[A1:[a-z0-9_]+]]: f32, %[[M1:[a-z0-9_]+]]: f32, %[[L1:[a-z0-9_]+]]: f32):
// CHECK-NEXT: %[[ISINF1:.*]] = arith.cmpf oeq, %[[M1]], %[[NINF]] : f32
// CHECK-NEXT: %[[SAFE1:.*]] = arith.select %[[ISINF1]], %[[ZERO]], %[[M1]] : f32
// CHECK-NEXT: %[[D1:.*]] = arith.subf %[[A1]], %[[SAFE1]] : f32
// CHECK-NEXT: %[[E1:.*]] = math.exp %[[D1]] : f32
// CHECK-NEXT: %[[S1:.*]] = arith.addf %[[L1]], %[[E1]] : f32
// CHECK-NEXT: linalg.yield %[[S1]] : f32
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]} ins(%[[X]], %[[MAX]], %[[SUM]] : tensor<?x5xf32>, tensor<?xf32>, tensor<?xf32>)
// CHECK-NEXT: ^bb0(%[[A2:[a-z0-9_]+]]: f32, %[[M2:[a-z0-9_]+]]: f32, %[[L2:[a-z0-9_]+]]: f32, %{{.*}}: f32):
// CHECK-NEXT: %[[ISINF2:.*]] = arith.cmpf oeq, %[[M2]], %[[NINF]] : f32
// CHECK-NEXT: %[[SAFE2:.*]] = arith.select %[[ISINF2]], %[[ZERO]], %[[M2]] : f32
// CHECK-NEXT: %[[D2:.*]] = arith.subf %[[A2]], %[[SAFE2]] : f32
// CHECK-NEXT: %[[E2:.*]] = math.exp %[[D2]] : f32
// CHECK-NEXT: %[[POS:.*]] = arith.cmpf ugt, %[[L2]], %[[ZERO]] : f32
// CHECK-NEXT: %[[Q:.*]] = arith.divf %[[E2]], %[[L2]] : f32
// CHECK-NEXT: %[[R:.*]] = arith.select %[[POS]], %[[Q]], %[[ZERO]] : f32
// CHECK-NEXT: linalg.yield %[[R]] : f32
func.func @softmax(%x: tensor<?x5xf32>) -> tensor<?x5xf32> {
  %0 = qkv.softmax %x axis 1 : tensor<?x5xf32> -> tensor<?x5xf32>
  return %0 : tensor<?x5xf32>
}

// split_heads is the seeds' reshape + transpose.
// CHECK-LABEL: func.func @split
// CHECK: tensor.expand_shape %{{.*}} {{\[}}[0], [1], [2, 3]] output_shape [%{{.*}}, %{{.*}}, 2, 3] : tensor<?x?x6xf32> into tensor<?x?x2x3xf32>
// CHECK: linalg.transpose {{.*}} permutation = [0, 2, 1, 3]
func.func @split(%x: tensor<?x?x6xf32>) -> tensor<?x2x?x3xf32> {
  %0 = qkv.split_heads %x heads 2 : tensor<?x?x6xf32> -> tensor<?x2x?x3xf32>
  return %0 : tensor<?x2x?x3xf32>
}

// CHECK-LABEL: func.func @merge
// CHECK: linalg.transpose {{.*}} permutation = [1, 0, 2]
// CHECK: tensor.collapse_shape %{{.*}} {{\[}}[0], [1, 2]] : tensor<?x2x3xf32> into tensor<?x6xf32>
func.func @merge(%x: tensor<2x?x3xf32>) -> tensor<?x6xf32> {
  %0 = qkv.merge_heads %x : tensor<2x?x3xf32> -> tensor<?x6xf32>
  return %0 : tensor<?x6xf32>
}

// A mask is an elementwise select against -inf; q and kv are the last two loop indices.
// CHECK-LABEL: func.func @mask
// CHECK: linalg.generic
// CHECK: %[[QI:.*]] = linalg.index 1 : index
// CHECK: %[[KI:.*]] = linalg.index 2 : index
// CHECK: %[[C:.*]] = arith.cmpi sge, %[[QI]], %[[KI]] : index
// CHECK: arith.select %[[C]], %{{.*}}, %cst : f32
func.func @mask(%s: tensor<2x?x?xf32>) -> tensor<2x?x?xf32> {
  %0 = qkv.mask %s : tensor<2x?x?xf32> -> tensor<2x?x?xf32> {
  ^bb0(%b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index):
    %c = arith.cmpi sge, %qi, %ki : index
    qkv.yield %c : i1
  }
  return %0 : tensor<2x?x?xf32>
}

// linear with bias: the output starts as the broadcast bias, then linalg.matmul
// accumulates x . w into it.
// CHECK-LABEL: func.func @linear
// CHECK: %[[INIT:.*]] = linalg.generic {{.*}} ins(%arg2 : tensor<3xf32>)
// CHECK: linalg.matmul ins(%arg0, %arg1 : tensor<?x4xf32>, tensor<4x3xf32>) outs(%[[INIT]] : tensor<?x3xf32>)
func.func @linear(%x: tensor<?x4xf32>, %w: tensor<4x3xf32>, %b: tensor<3xf32>) -> tensor<?x3xf32> {
  %0 = qkv.linear %x, %w bias %b : tensor<?x4xf32>, tensor<4x3xf32>, tensor<3xf32> -> tensor<?x3xf32>
  return %0 : tensor<?x3xf32>
}

// RoPE: the frequencies base^(-2i/Dh) once per pair (f64), then a table of cos and sin
// of the f64 angles once per row position (rounded to f32, as the rotation uses them),
// then each half of the output one elementwise op over the two halves of x and the
// tables, written into its half: x1 cos - x2 sin, then x2 cos + x1 sin.
// CHECK-LABEL: func.func @rope
// CHECK: %[[RINV:.*]] = linalg.generic {{.*}} outs(%{{.*}} : tensor<2xf64>)
// CHECK: math.exp %{{.*}} : f64
// CHECK: %[[RT:.*]]:2 = linalg.generic {{.*}} ins(%[[RINV]] : tensor<2xf64>) outs(%{{.*}}, %{{.*}} : tensor<?x2xf32>, tensor<?x2xf32>)
// CHECK: ^bb0(%[[RF:.*]]: f64,
// CHECK: %[[RROW:.*]] = linalg.index 0 : index
// CHECK: %[[RANG:.*]] = arith.mulf %{{.*}}, %[[RF]] : f64
// CHECK: math.cos %[[RANG]] : f64
// CHECK: math.sin %[[RANG]] : f64
// CHECK: %[[RX1:.*]] = tensor.extract_slice %arg0[0, 0] [%{{.*}}, 2] [1, 1]
// CHECK: %[[RX2:.*]] = tensor.extract_slice %arg0[0, 2] [%{{.*}}, 2] [1, 1]
// CHECK: %[[RLO:.*]] = linalg.generic {{.*}} ins(%[[RX1]], %[[RX2]], %[[RT]]#0, %[[RT]]#1 :
// CHECK: ^bb0(%[[RA:.*]]: f32, %[[RB:.*]]: f32, %[[RC:.*]]: f32, %[[RS:.*]]: f32,
// CHECK: %[[RAC:.*]] = arith.mulf %[[RA]], %[[RC]]
// CHECK: %[[RBS:.*]] = arith.mulf %[[RB]], %[[RS]]
// CHECK: arith.subf %[[RAC]], %[[RBS]]
// CHECK: %[[ROUT:.*]] = tensor.insert_slice %[[RLO]] into %{{.*}}[0, 0] [%{{.*}}, 2] [1, 1]
// CHECK: %[[RHI:.*]] = linalg.generic {{.*}} ins(%[[RX1]], %[[RX2]], %[[RT]]#0, %[[RT]]#1 :
// CHECK: ^bb0(%[[RA2:.*]]: f32, %[[RB2:.*]]: f32, %[[RC2:.*]]: f32, %[[RS2:.*]]: f32,
// CHECK: %[[RBC:.*]] = arith.mulf %[[RB2]], %[[RC2]]
// CHECK: %[[RAS:.*]] = arith.mulf %[[RA2]], %[[RS2]]
// CHECK: arith.addf %[[RBC]], %[[RAS]]
// CHECK: tensor.insert_slice %[[RHI]] into %[[ROUT]][0, 2] [%{{.*}}, 2] [1, 1]
func.func @rope(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %0 = qkv.rope %x base 10000.0 offset 0 : tensor<?x4xf32> -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// Embedding gathers table rows by id inside a generic over the output.
// CHECK-LABEL: func.func @embedding
// CHECK: linalg.generic {{.*}} ins(%arg0 : tensor<?xi32>)
// CHECK: %[[ROW:.*]] = arith.index_cast %{{.*}} : i32 to index
// CHECK: %[[COL:.*]] = linalg.index 1 : index
// CHECK: tensor.extract %arg1[%[[ROW]], %[[COL]]] : tensor<10x6xf32>
func.func @embedding(%ids: tensor<?xi32>, %table: tensor<10x6xf32>) -> tensor<?x6xf32> {
  %0 = qkv.embedding %table[%ids] : (tensor<?xi32>, tensor<10x6xf32>) -> tensor<?x6xf32>
  return %0 : tensor<?x6xf32>
}

// Batched matmul with a broadcast 2-D rhs: linalg.batch_matmul whose rhs map drops the
// batch loop (maps A, B, O are checked at the top: MLIR prints them before the module).
// CHECK-LABEL: func.func @matmul_broadcast
// CHECK: %[[ZERO:.*]] = linalg.fill
// CHECK: linalg.batch_matmul indexing_maps = [#[[A]], #[[B]], #[[O]]] ins(%arg0, %arg1 : tensor<?x?x4xf32>, tensor<4x3xf32>) outs(%[[ZERO]] : tensor<?x?x3xf32>)
func.func @matmul_broadcast(%a: tensor<?x?x4xf32>, %b: tensor<4x3xf32>) -> tensor<?x?x3xf32> {
  %0 = qkv.matmul %a, %b : (tensor<?x?x4xf32>, tensor<4x3xf32>) -> tensor<?x?x3xf32>
  return %0 : tensor<?x?x3xf32>
}

// layer_norm: mean, sum of squared deviations, then (x - mean) / sqrt(var + eps) * gamma
// + beta; eps is the op's, rounded to f32.
// CHECK-LABEL: func.func @layer_norm
// CHECK-SAME: (%[[X:arg0]]: tensor<?x5xf32>, %[[G:arg1]]: tensor<5xf32>, %[[B:arg2]]: tensor<5xf32>)
// CHECK-DAG: %[[EPS:.*]] = arith.constant 9.99999974E-6 : f32
// CHECK-DAG: %[[N:.*]] = arith.constant 5.000000e+00 : f32
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}} ins(%[[X]] : tensor<?x5xf32>)
// CHECK: arith.addf
// CHECK: %[[MEAN:.*]] = linalg.generic {{.*}} ins(%[[SUM]] : tensor<?xf32>)
// CHECK-NEXT: ^bb0(%[[S:[a-z0-9_]+]]: f32, %{{.*}}: f32):
// CHECK-NEXT: arith.divf %[[S]], %[[N]] : f32
// CHECK: %[[SQ:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[MEAN]] : tensor<?x5xf32>, tensor<?xf32>)
// CHECK-NEXT: ^bb0(%[[A:[a-z0-9_]+]]: f32, %[[M:[a-z0-9_]+]]: f32, %[[ACC:[a-z0-9_]+]]: f32):
// CHECK-NEXT: %[[C:.*]] = arith.subf %[[A]], %[[M]] : f32
// CHECK-NEXT: %[[C2:.*]] = arith.mulf %[[C]], %[[C]] : f32
// CHECK-NEXT: arith.addf %[[ACC]], %[[C2]] : f32
// CHECK: linalg.generic {{.*}} ins(%[[X]], %[[SQ]], %[[MEAN]], %[[G]], %[[B]] :
// CHECK-NEXT: ^bb0(%[[XI:[a-z0-9_]+]]: f32, %[[SS:[a-z0-9_]+]]: f32, %[[MI:[a-z0-9_]+]]: f32, %[[GI:[a-z0-9_]+]]: f32, %[[BI:[a-z0-9_]+]]: f32, %{{.*}}: f32):
// CHECK-NEXT: %[[VAR:.*]] = arith.divf %[[SS]], %[[N]] : f32
// CHECK-NEXT: %[[VE:.*]] = arith.addf %[[VAR]], %[[EPS]] : f32
// CHECK-NEXT: %[[DEN:.*]] = math.sqrt %[[VE]] : f32
// CHECK-NEXT: %[[DX:.*]] = arith.subf %[[XI]], %[[MI]] : f32
// CHECK-NEXT: %[[Y:.*]] = arith.divf %[[DX]], %[[DEN]] : f32
// CHECK-NEXT: %[[YG:.*]] = arith.mulf %[[Y]], %[[GI]] : f32
// CHECK-NEXT: %[[YB:.*]] = arith.addf %[[YG]], %[[BI]] : f32
// CHECK-NEXT: linalg.yield %[[YB]] : f32
func.func @layer_norm(%x: tensor<?x5xf32>, %g: tensor<5xf32>, %b: tensor<5xf32>) -> tensor<?x5xf32> {
  %0 = qkv.layer_norm %x gamma %g : tensor<5xf32> beta %b : tensor<5xf32> eps 0.00001 : tensor<?x5xf32> -> tensor<?x5xf32>
  return %0 : tensor<?x5xf32>
}

// rms_norm: x / sqrt(mean(x^2) + eps).
// CHECK-LABEL: func.func @rms_norm
// CHECK-SAME: (%[[X:arg0]]: tensor<?x5xf32>)
// CHECK-DAG: %[[EPS:.*]] = arith.constant 0.00999999977 : f32
// CHECK-DAG: %[[N:.*]] = arith.constant 5.000000e+00 : f32
// CHECK: %[[SQ:.*]] = linalg.generic {{.*}} ins(%[[X]] : tensor<?x5xf32>)
// CHECK-NEXT: ^bb0(%[[A:[a-z0-9_]+]]: f32, %[[ACC:[a-z0-9_]+]]: f32):
// CHECK-NEXT: %[[A2:.*]] = arith.mulf %[[A]], %[[A]] : f32
// CHECK-NEXT: arith.addf %[[ACC]], %[[A2]] : f32
// CHECK: linalg.generic {{.*}} ins(%[[X]], %[[SQ]] : tensor<?x5xf32>, tensor<?xf32>)
// CHECK-NEXT: ^bb0(%[[XI:[a-z0-9_]+]]: f32, %[[SS:[a-z0-9_]+]]: f32, %{{.*}}: f32):
// CHECK-NEXT: %[[MS:.*]] = arith.divf %[[SS]], %[[N]] : f32
// CHECK-NEXT: %[[ME:.*]] = arith.addf %[[MS]], %[[EPS]] : f32
// CHECK-NEXT: %[[DEN:.*]] = math.sqrt %[[ME]] : f32
// CHECK-NEXT: %[[Y:.*]] = arith.divf %[[XI]], %[[DEN]] : f32
// CHECK-NEXT: linalg.yield %[[Y]] : f32
func.func @rms_norm(%x: tensor<?x5xf32>) -> tensor<?x5xf32> {
  %0 = qkv.rms_norm %x eps 0.01 : tensor<?x5xf32> -> tensor<?x5xf32>
  return %0 : tensor<?x5xf32>
}

// softplus: max(x, 0) + log1p(e), e = exp(-|x|), with log1p(e) as log(u) * (e / (u - 1)),
// u = 1 + e, or e itself where u rounds to 1 (log(1 + e) would give 0 there).
// CHECK-LABEL: func.func @softplus
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]}
// CHECK-NEXT: ^bb0(%[[SX:[a-z0-9_]+]]: f32, %{{.*}}: f32):
// CHECK-NEXT: %[[ABS:.*]] = math.absf %[[SX]] : f32
// CHECK-NEXT: %[[NEG:.*]] = arith.negf %[[ABS]] : f32
// CHECK-NEXT: %[[E:.*]] = math.exp %[[NEG]] : f32
// CHECK-NEXT: %[[U:.*]] = arith.addf %[[E]], %{{.*}} : f32
// CHECK-NEXT: %[[D:.*]] = arith.subf %[[U]], %{{.*}} : f32
// CHECK-NEXT: %[[RATIO:.*]] = arith.divf %[[E]], %[[D]] : f32
// CHECK-NEXT: %[[LOG:.*]] = math.log %[[U]] : f32
// CHECK-NEXT: %[[LG:.*]] = arith.mulf %[[LOG]], %[[RATIO]] : f32
// CHECK-NEXT: %[[EXACT:.*]] = arith.cmpf oeq, %[[D]], %{{.*}} : f32
// CHECK-NEXT: %[[LOG1P:.*]] = arith.select %[[EXACT]], %[[E]], %[[LG]] : f32
// CHECK-NEXT: %[[POS:.*]] = arith.maximumf %[[SX]], %{{.*}} : f32
// CHECK-NEXT: %[[Y:.*]] = arith.addf %[[POS]], %[[LOG1P]] : f32
// CHECK-NEXT: linalg.yield %[[Y]] : f32
func.func @softplus(%x: tensor<?x5xf32>) -> tensor<?x5xf32> {
  %0 = qkv.softplus %x : tensor<?x5xf32> -> tensor<?x5xf32>
  return %0 : tensor<?x5xf32>
}

// sigmoid: 1 / (1 + exp(-x)).
// CHECK-LABEL: func.func @sigmoid
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]}
// CHECK-NEXT: ^bb0(%[[GX:[a-z0-9_]+]]: f32, %{{.*}}: f32):
// CHECK-NEXT: %[[GN:.*]] = arith.negf %[[GX]] : f32
// CHECK-NEXT: %[[GE:.*]] = math.exp %[[GN]] : f32
// CHECK-NEXT: %[[GU:.*]] = arith.addf %[[GE]], %[[ONE:.*]] : f32
// CHECK-NEXT: %[[GY:.*]] = arith.divf %[[ONE]], %[[GU]] : f32
// CHECK-NEXT: linalg.yield %[[GY]] : f32
func.func @sigmoid(%x: tensor<?x5xf32>) -> tensor<?x5xf32> {
  %0 = qkv.sigmoid %x : tensor<?x5xf32> -> tensor<?x5xf32>
  return %0 : tensor<?x5xf32>
}

// relu: max(x, 0), with arith.maximumf (a NaN stays NaN).
// CHECK-LABEL: func.func @relu
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]}
// CHECK-NEXT: ^bb0(%[[RX:[a-z0-9_]+]]: f32, %{{.*}}: f32):
// CHECK-NEXT: %[[RY:.*]] = arith.maximumf %[[RX]], %[[ZERO]] : f32
// CHECK-NEXT: linalg.yield %[[RY]] : f32
func.func @relu(%x: tensor<?x5xf32>) -> tensor<?x5xf32> {
  %0 = qkv.relu %x : tensor<?x5xf32> -> tensor<?x5xf32>
  return %0 : tensor<?x5xf32>
}

// softcap: cap * tanh(x * (1 / cap)), the reciprocal a constant.
// CHECK-LABEL: func.func @softcap
// CHECK-DAG: %[[RCAP:.*]] = arith.constant 2.000000e-02 : f32
// CHECK-DAG: %[[CAP:.*]] = arith.constant 5.000000e+01 : f32
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]}
// CHECK-NEXT: ^bb0(%[[SX:[a-z0-9_]+]]: f32, %{{.*}}: f32):
// CHECK-NEXT: %[[SU:.*]] = arith.mulf %[[SX]], %[[RCAP]] : f32
// CHECK-NEXT: %[[ST:.*]] = math.tanh %[[SU]] : f32
// CHECK-NEXT: %[[SY:.*]] = arith.mulf %[[ST]], %[[CAP]] : f32
// CHECK-NEXT: linalg.yield %[[SY]] : f32
func.func @softcap(%x: tensor<?x5xf32>) -> tensor<?x5xf32> {
  %0 = qkv.softcap %x cap 50.0 : tensor<?x5xf32> -> tensor<?x5xf32>
  return %0 : tensor<?x5xf32>
}

// geglu: the exact GELU of the gate (its erf inline in f32), times up.
// CHECK-LABEL: func.func @geglu
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]}
// CHECK-NEXT: ^bb0(%[[GG:[a-z0-9_]+]]: f32, %[[GU:[a-z0-9_]+]]: f32, %{{.*}}: f32):
// CHECK: arith.mulf %[[GG]], %{{.*}} : f32
// CHECK-NOT: math.erf
// CHECK: math.fma
// CHECK-NOT: math.erf
// CHECK: %[[GY:.*]] = arith.mulf %{{.*}}, %[[GU]] : f32
// CHECK-NEXT: linalg.yield %[[GY]] : f32
func.func @geglu(%g: tensor<?x5xf32>, %u: tensor<?x5xf32>) -> tensor<?x5xf32> {
  %0 = qkv.geglu %g, %u : (tensor<?x5xf32>, tensor<?x5xf32>) -> tensor<?x5xf32>
  return %0 : tensor<?x5xf32>
}

// cache_view materialised: stored rows below lengths[b], then the new rows, then zeros;
// each read is guarded so no index is out of bounds.
// CHECK-LABEL: func.func @cache_view
// CHECK-SAME: (%[[PAST:arg0]]: tensor<2x2x16x8xf32>, %[[LEN:arg1]]: tensor<2xi64>, %[[NEW:arg2]]: tensor<2x2x1x8xf32>)
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG: %[[N:.*]] = arith.constant 1 : index
// CHECK: linalg.generic {{.*}} outs(%{{.*}} : tensor<2x2x?x8xf32>)
// CHECK: %[[B:.*]] = linalg.index 0 : index
// CHECK-NEXT: %[[H:.*]] = linalg.index 1 : index
// CHECK-NEXT: %[[J:.*]] = linalg.index 2 : index
// CHECK-NEXT: %[[D:.*]] = linalg.index 3 : index
// CHECK-NEXT: %[[L64:.*]] = tensor.extract %[[LEN]][%[[B]]] : tensor<2xi64>
// CHECK-NEXT: %[[L:.*]] = arith.index_cast %[[L64]] : i64 to index
// CHECK-NEXT: %[[INSTORE:.*]] = arith.cmpi slt, %[[J]], %[[L]] : index
// CHECK-NEXT: %[[ROW:.*]] = arith.subi %[[J]], %[[L]] : index
// CHECK-NEXT: %[[INNEW:.*]] = arith.cmpi slt, %[[ROW]], %[[N]] : index
// CHECK-NEXT: scf.if %[[INSTORE]] -> (f32) {
// CHECK-NEXT: %[[S:.*]] = tensor.extract %[[PAST]][%[[B]], %[[H]], %[[J]], %[[D]]]
// CHECK-NEXT: scf.yield %[[S]] : f32
// CHECK-NEXT: } else {
// CHECK-NEXT: scf.if %[[INNEW]] -> (f32) {
// CHECK-NEXT: %[[F:.*]] = tensor.extract %[[NEW]][%[[B]], %[[H]], %[[ROW]], %[[D]]]
// CHECK-NEXT: scf.yield %[[F]] : f32
// CHECK-NEXT: } else {
// CHECK-NEXT: scf.yield %[[ZERO]] : f32
// CHECK: tensor.cast %{{.*}} : tensor<2x2x?x8xf32> to tensor<2x2x17x8xf32>
func.func @cache_view(%past: tensor<2x2x16x8xf32>, %len: tensor<2xi64>, %new: tensor<2x2x1x8xf32>) -> tensor<2x2x17x8xf32> {
  %0 = qkv.cache_view %past[%len], %new : (tensor<2x2x16x8xf32>, tensor<2xi64>, tensor<2x2x1x8xf32>) -> tensor<2x2x17x8xf32>
  return %0 : tensor<2x2x17x8xf32>
}

// paged_cache_view: row j of sequence b is row j % page of page table[b, j / page].
// CHECK-LABEL: func.func @paged_cache_view
// CHECK-SAME: (%[[POOL:arg0]]: tensor<?x2x4x8xf32>, %[[TAB:arg1]]: tensor<2x3xi32>, %[[LEN:arg2]]: tensor<2xi64>, %[[NEW:arg3]]: tensor<2x2x?x8xf32>)
// CHECK-DAG: %[[PAGE:.*]] = arith.constant 4 : index
// CHECK: %[[B:.*]] = linalg.index 0 : index
// CHECK-NEXT: %[[H:.*]] = linalg.index 1 : index
// CHECK-NEXT: %[[J:.*]] = linalg.index 2 : index
// CHECK-NEXT: %[[D:.*]] = linalg.index 3 : index
// CHECK: scf.if
// CHECK-NEXT: %[[SLOT:.*]] = arith.divui %[[J]], %[[PAGE]] : index
// CHECK-NEXT: %[[ID:.*]] = tensor.extract %[[TAB]][%[[B]], %[[SLOT]]] : tensor<2x3xi32>
// CHECK-NEXT: %[[PG:.*]] = arith.index_cast %[[ID]] : i32 to index
// CHECK-NEXT: %[[R:.*]] = arith.remui %[[J]], %[[PAGE]] : index
// CHECK-NEXT: tensor.extract %[[POOL]][%[[PG]], %[[H]], %[[R]], %[[D]]] : tensor<?x2x4x8xf32>
func.func @paged_cache_view(%pool: tensor<?x2x4x8xf32>, %table: tensor<2x3xi32>, %len: tensor<2xi64>, %new: tensor<2x2x?x8xf32>) -> tensor<2x2x?x8xf32> {
  %1 = qkv.paged_cache_view %pool[%table, %len], %new : (tensor<?x2x4x8xf32>, tensor<2x3xi32>, tensor<2xi64>, tensor<2x2x?x8xf32>) -> tensor<2x2x?x8xf32>
  return %1 : tensor<2x2x?x8xf32>
}

// rope with positions (B, L): row (b, i) rotates by positions[b, i] instead of offset + i;
// the tables are (B, L, Dh/2).
// CHECK-LABEL: func.func @rope_positions
// CHECK-SAME: (%[[X:arg0]]: tensor<2x?x8xf32>, %[[POS:arg1]]: tensor<2x?xi64>)
// CHECK: linalg.generic {{.*}} outs(%{{.*}}, %{{.*}} : tensor<2x?x4xf32>, tensor<2x?x4xf32>)
// CHECK: %[[I:.*]] = linalg.index 1 : index
// CHECK: %[[B:.*]] = linalg.index 0 : index
// CHECK: %[[P64:.*]] = tensor.extract %[[POS]][%[[B]], %[[I]]] : tensor<2x?xi64>
// CHECK-NEXT: %[[P:.*]] = arith.index_cast %[[P64]] : i64 to index
// CHECK: %[[PI:.*]] = arith.index_cast %[[P]] : index to i64
// CHECK-NEXT: %[[PF:.*]] = arith.sitofp %[[PI]] : i64 to f64
// CHECK-NEXT: %[[ANG:.*]] = arith.mulf %[[PF]], %{{.*}} : f64
// CHECK-NEXT: math.cos %[[ANG]] : f64
func.func @rope_positions(%x: tensor<2x?x8xf32>, %pos: tensor<2x?xi64>) -> tensor<2x?x8xf32> {
  %2 = qkv.rope %x positions %pos : tensor<2x?xi64> base 10000.0 offset 0 : tensor<2x?x8xf32> -> tensor<2x?x8xf32>
  return %2 : tensor<2x?x8xf32>
}

// q's and k's rope over the same positions: their tables' rows are counted from the
// positions (x's dims are two values), so after CSE one table serves both, one cos a layer.
// CSE-LABEL: func.func @rope_q_and_k
// CSE: math.cos
// CSE-NOT: math.cos
// CSE: return
func.func @rope_q_and_k(%q: tensor<2x?x8xf32>, %k: tensor<2x?x8xf32>, %pos: tensor<2x?xi64>) -> (tensor<2x?x8xf32>, tensor<2x?x8xf32>) {
  %0 = qkv.rope %q positions %pos : tensor<2x?xi64> base 10000.0 offset 0 : tensor<2x?x8xf32> -> tensor<2x?x8xf32>
  %1 = qkv.rope %k positions %pos : tensor<2x?xi64> base 10000.0 offset 0 : tensor<2x?x8xf32> -> tensor<2x?x8xf32>
  return %0, %1 : tensor<2x?x8xf32>, tensor<2x?x8xf32>
}

// Negative axes count from the end, as the verifiers accept them: -1 is the last axis.
// CHECK-LABEL: func.func @negative_axes
// CHECK: linalg.transpose {{.*}} permutation = [1, 0]
// CHECK: tensor.insert_slice %{{.*}} into %{{.*}}[0, %{{.*}}] [%{{.*}}, 2] [1, 1] : tensor<?x2xf32> into tensor<?x4xf32>
// CHECK: tensor.insert_slice %{{.*}} into %{{.*}}[0, %{{.*}}] [%{{.*}}, 2] [1, 1] : tensor<?x2xf32> into tensor<?x4xf32>
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%{{.*}} : tensor<?x2xf32>) outs(%{{.*}} : tensor<?xf32>)
func.func @negative_axes(%x: tensor<?x2xf32>) -> (tensor<2x?xf32>, tensor<?x4xf32>, tensor<?x2xf32>) {
  %0 = qkv.transpose %x axes(-2, -1) : tensor<?x2xf32> -> tensor<2x?xf32>
  %1 = qkv.concat %x, %x axis -1 : (tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x4xf32>
  %2 = qkv.softmax %x axis -1 : tensor<?x2xf32> -> tensor<?x2xf32>
  return %0, %1, %2 : tensor<2x?xf32>, tensor<?x4xf32>, tensor<?x2xf32>
}

// merge_heads with dynamic heads and head dim (found by the graph fuzzer: the verifier used
// to demand static ones): the same transpose and collapse, sizes from tensor.dim.
// CHECK-LABEL: func.func @merge_dynamic
// CHECK: linalg.transpose {{.*}} permutation = [1, 0, 2]
// CHECK: tensor.collapse_shape %{{.*}} {{\[}}[0], [1, 2]] : tensor<?x?x?xf32> into tensor<?x?xf32>
func.func @merge_dynamic(%x: tensor<?x?x?xf32>) -> tensor<?x?xf32> {
  %0 = qkv.merge_heads %x : tensor<?x?x?xf32> -> tensor<?x?xf32>
  return %0 : tensor<?x?xf32>
}
