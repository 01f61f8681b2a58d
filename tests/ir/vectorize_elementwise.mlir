// qkv-vectorize-elementwise: elementwise linalg.generic ops on buffers (with broadcast
// operands) and reductions along the innermost loop become vector loops, parallel over
// the outer loops, the last vector of a row under a mask; f32 transcendental ops become
// MLIR's polynomial approximations. Other generics are left alone. 8 lanes (256 bits).
// RUN: qkv-opt %s --pass-pipeline="builtin.module(qkv-vectorize-elementwise{vector-bits=256},canonicalize,cse)" | FileCheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
#row = affine_map<(d0, d1) -> (d0)>
#tr = affine_map<(d0, d1) -> (d1, d0)>

// A bias added along rows, then exp: 70 columns are 8 whole vectors and 6 lanes.
// CHECK-LABEL: func.func @bias_exp
// CHECK-SAME: (%[[X:.*]]: memref<?x70xf32>, %[[B:.*]]: memref<70xf32>, %[[Y:.*]]: memref<?x70xf32>)
// CHECK-NOT: linalg.generic
// CHECK: scf.parallel (%[[I:.*]]) = (%c0) to (%{{.*}}) step (%c1)
// CHECK: scf.for %[[J:.*]] = %c0 to %c64 step %c8
// CHECK: %[[XV:.*]] = vector.load %[[X]][%[[I]], %[[J]]] : memref<?x70xf32>, vector<8xf32>
// CHECK: %[[BV:.*]] = vector.load %[[B]][%[[J]]] : memref<70xf32>, vector<8xf32>
// CHECK: %[[S:.*]] = arith.addf %[[XV]], %[[BV]] : vector<8xf32>
// exp as a polynomial: no math.exp is left
// CHECK-NOT: math.exp
// CHECK: math.floor
// CHECK: vector.store %{{.*}}, %[[Y]][%[[I]], %[[J]]]
// CHECK: %[[M:.*]] = vector.constant_mask [6] : vector<8xi1>
// CHECK: vector.maskedload %[[X]][%[[I]], %c64], %[[M]]
// CHECK: vector.maskedload %[[B]][%c64], %[[M]]
// CHECK: vector.maskedstore %[[Y]][%[[I]], %c64], %[[M]]
func.func @bias_exp(%x: memref<?x70xf32>, %b: memref<70xf32>, %y: memref<?x70xf32>) {
  linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %b : memref<?x70xf32>, memref<70xf32>) outs(%y : memref<?x70xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    %e = math.exp %s : f32
    linalg.yield %e : f32
  }
  return
}

// A per-row scalar (a norm's mean) is loaded once per row and broadcast.
// CHECK-LABEL: func.func @minus_row
// CHECK: scf.parallel (%[[I:.*]]) =
// CHECK: %[[S:.*]] = memref.load %{{.*}}[%[[I]]] : memref<?xf32>
// CHECK: %[[SV:.*]] = vector.broadcast %[[S]] : f32 to vector<8xf32>
// CHECK: scf.for
// CHECK: arith.subf %{{.*}}, %[[SV]] : vector<8xf32>
func.func @minus_row(%x: memref<?x?xf32>, %m: memref<?xf32>, %y: memref<?x?xf32>) {
  linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %m : memref<?x?xf32>, memref<?xf32>) outs(%y : memref<?x?xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.subf %a, %c : f32
    linalg.yield %s : f32
  }
  return
}

// A sum of squares along each row: one vector of partial sums through the row (the
// masked tail adds only its lanes), reduced at its end and added to the output.
// CHECK-LABEL: func.func @row_sum
// CHECK-SAME: (%[[X:.*]]: memref<?x?xf32>, %[[S:.*]]: memref<?xf32>)
// CHECK: %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : vector<8xf32>
// CHECK: scf.parallel (%[[I:.*]]) =
// CHECK: %[[ACC:.*]] = scf.for %{{.*}} = %c0 to %{{.*}} step %c8 iter_args(%[[A:.*]] = %[[ZERO]]) -> (vector<8xf32>)
// CHECK: %[[V:.*]] = vector.load %[[X]]
// CHECK: %[[SQ:.*]] = arith.mulf %[[V]], %[[V]]
// CHECK: %[[NEXT:.*]] = arith.addf %[[A]], %[[SQ]]
// CHECK: scf.yield %[[NEXT]]
// CHECK: %[[TAIL:.*]] = scf.if %{{.*}} -> (vector<8xf32>)
// CHECK: %[[MASK:.*]] = vector.create_mask
// CHECK: arith.select %[[MASK]], %{{.*}}, %[[ACC]]
// CHECK: %[[R:.*]] = vector.reduction <add>, %[[TAIL]] : vector<8xf32> into f32
// CHECK: %[[OLD:.*]] = memref.load %[[S]][%[[I]]]
// CHECK: %[[NEW:.*]] = arith.addf %[[OLD]], %[[R]] : f32
// CHECK: memref.store %[[NEW]], %[[S]][%[[I]]]
func.func @row_sum(%x: memref<?x?xf32>, %s: memref<?xf32>) {
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%x : memref<?x?xf32>) outs(%s : memref<?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %a : f32
    %r = arith.addf %o, %m : f32
    linalg.yield %r : f32
  }
  return
}

// A row max starts from -inf.
// CHECK-LABEL: func.func @row_max
// CHECK: arith.constant dense<0xFF800000> : vector<8xf32>
// CHECK: arith.maximumf %{{.*}}, %{{.*}} : vector<8xf32>
// CHECK: vector.reduction <maximumf>
func.func @row_max(%x: memref<?x?xf32>, %s: memref<?xf32>) {
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]} ins(%x : memref<?x?xf32>) outs(%s : memref<?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.maximumf %o, %a : f32
    linalg.yield %r : f32
  }
  return
}

// A fill (the yielded value comes from outside the body), in f64: 4 lanes.
// CHECK-LABEL: func.func @fill64
// CHECK: %[[V:.*]] = vector.broadcast %{{.*}} : f64 to vector<4xf64>
// CHECK: vector.store %[[V]], %{{.*}} : memref<?x?xf64>, vector<4xf64>
func.func @fill64(%y: memref<?x?xf64>, %v: f64) {
  linalg.generic {indexing_maps = [#id], iterator_types = ["parallel", "parallel"]} outs(%y : memref<?x?xf64>) {
  ^bb0(%o: f64):
    linalg.yield %v : f64
  }
  return
}

// Left alone: a transpose (the innermost loop is not the input's last dimension), f64
// erf (no vector form: one libm call per lane), a strided inner dimension.
// CHECK-LABEL: func.func @transpose
// CHECK: linalg.generic
func.func @transpose(%x: memref<?x?xf32>, %y: memref<?x?xf32>) {
  linalg.generic {indexing_maps = [#tr, #id], iterator_types = ["parallel", "parallel"]} ins(%x : memref<?x?xf32>) outs(%y : memref<?x?xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  return
}
// CHECK-LABEL: func.func @erf64
// CHECK: linalg.generic
func.func @erf64(%x: memref<?x?xf64>, %y: memref<?x?xf64>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : memref<?x?xf64>) outs(%y : memref<?x?xf64>) {
  ^bb0(%a: f64, %o: f64):
    %e = math.erf %a : f64
    linalg.yield %e : f64
  }
  return
}
// CHECK-LABEL: func.func @strided
// CHECK: linalg.generic
func.func @strided(%x: memref<?x?xf32, strided<[1, ?]>>, %y: memref<?x?xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : memref<?x?xf32, strided<[1, ?]>>) outs(%y : memref<?x?xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  return
}
