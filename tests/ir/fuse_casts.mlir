// qkv-fuse-casts: a half-precision graph's widenings fuse into the generics that read
// them, and an elementwise generic with one use fuses into the rounding that reads it;
// nothing else fuses.
// RUN: qkv-opt %s --pass-pipeline="builtin.module(func.func(qkv-fuse-casts))" | FileCheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// A bf16 add as the import lowers it: widen both operands, add in f32, round. One
// generic remains, reading the bf16 operands and writing the bf16 result.
// CHECK-LABEL: func.func @bf16_add
// CHECK-COUNT-1: linalg.generic
// CHECK-NOT: linalg.generic
// CHECK: ins(%arg0, %arg1 : tensor<?x8xbf16>, tensor<?x8xbf16>) outs(%{{.*}} : tensor<?x8xbf16>)
// CHECK: arith.extf
// CHECK: arith.extf
// CHECK: arith.addf
// CHECK: arith.truncf
// CHECK: linalg.yield %{{.*}} : bf16
func.func @bf16_add(%a: tensor<?x8xbf16>, %b: tensor<?x8xbf16>) -> tensor<?x8xbf16> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %a, %c0 : tensor<?x8xbf16>
  %ef = tensor.empty(%n) : tensor<?x8xf32>
  %eh = tensor.empty(%n) : tensor<?x8xbf16>
  %wa = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<?x8xbf16>) outs(%ef : tensor<?x8xf32>) {
  ^bb0(%x: bf16, %o: f32):
    %w = arith.extf %x : bf16 to f32
    linalg.yield %w : f32
  } -> tensor<?x8xf32>
  %wb = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%b : tensor<?x8xbf16>) outs(%ef : tensor<?x8xf32>) {
  ^bb0(%x: bf16, %o: f32):
    %w = arith.extf %x : bf16 to f32
    linalg.yield %w : f32
  } -> tensor<?x8xf32>
  %s = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%wa, %wb : tensor<?x8xf32>, tensor<?x8xf32>) outs(%ef : tensor<?x8xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %z = arith.addf %x, %y : f32
    linalg.yield %z : f32
  } -> tensor<?x8xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%s : tensor<?x8xf32>) outs(%eh : tensor<?x8xbf16>) {
  ^bb0(%x: f32, %o: bf16):
    %t = arith.truncf %x : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<?x8xbf16>
  return %r : tensor<?x8xbf16>
}

// A widening read by a reduction and by an elementwise op: it fuses into both (each
// converts per element), and the widened tensor is never written.
// CHECK-LABEL: func.func @widening_read_twice
// CHECK: linalg.generic
// CHECK-SAME: iterator_types = ["parallel", "reduction"]
// CHECK-SAME: ins(%arg0 : tensor<?x8xbf16>)
// CHECK: arith.extf
// CHECK: linalg.generic
// CHECK-SAME: ins(%arg0, %{{.*}} : tensor<?x8xbf16>, tensor<?xf32>)
// CHECK: arith.extf
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @widening_read_twice(%a: tensor<?x8xbf16>) -> tensor<?x8xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %a, %c0 : tensor<?x8xbf16>
  %ef = tensor.empty(%n) : tensor<?x8xf32>
  %er = tensor.empty(%n) : tensor<?xf32>
  %fr = linalg.fill ins(%zero : f32) outs(%er : tensor<?xf32>) -> tensor<?xf32>
  %wa = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : tensor<?x8xbf16>) outs(%ef : tensor<?x8xf32>) {
  ^bb0(%x: bf16, %o: f32):
    %w = arith.extf %x : bf16 to f32
    linalg.yield %w : f32
  } -> tensor<?x8xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%wa : tensor<?x8xf32>) outs(%fr : tensor<?xf32>) {
  ^bb0(%x: f32, %o: f32):
    %z = arith.addf %x, %o : f32
    linalg.yield %z : f32
  } -> tensor<?xf32>
  %d = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%wa, %sum : tensor<?x8xf32>, tensor<?xf32>) outs(%ef : tensor<?x8xf32>) {
  ^bb0(%x: f32, %s: f32, %o: f32):
    %z = arith.divf %x, %s : f32
    linalg.yield %z : f32
  } -> tensor<?x8xf32>
  return %d : tensor<?x8xf32>
}

// f32 generics without a cast stay apart (the matmul's consumer stays its epilogue),
// and so does an elementwise op with two uses before a rounding: fusing it would
// compute it twice.
// CHECK-LABEL: func.func @left_alone
// CHECK: linalg.matmul
// CHECK: %[[G:.*]] = linalg.generic
// CHECK: math.exp
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[G]] : tensor<?x8xf32>)
// CHECK: arith.negf
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[G]] : tensor<?x8xf32>)
// CHECK: arith.truncf
func.func @left_alone(%x: tensor<?x8xf32>, %w: tensor<8x8xf32>) -> (tensor<?x8xf32>, tensor<?x8xbf16>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %n = tensor.dim %x, %c0 : tensor<?x8xf32>
  %ef = tensor.empty(%n) : tensor<?x8xf32>
  %eh = tensor.empty(%n) : tensor<?x8xbf16>
  %f = linalg.fill ins(%zero : f32) outs(%ef : tensor<?x8xf32>) -> tensor<?x8xf32>
  %m = linalg.matmul ins(%x, %w : tensor<?x8xf32>, tensor<8x8xf32>) outs(%f : tensor<?x8xf32>) -> tensor<?x8xf32>
  %e = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%m : tensor<?x8xf32>) outs(%ef : tensor<?x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %z = math.exp %v : f32
    linalg.yield %z : f32
  } -> tensor<?x8xf32>
  %g = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%e : tensor<?x8xf32>) outs(%ef : tensor<?x8xf32>) {
  ^bb0(%v: f32, %o: f32):
    %z = arith.negf %v : f32
    linalg.yield %z : f32
  } -> tensor<?x8xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%e : tensor<?x8xf32>) outs(%eh : tensor<?x8xbf16>) {
  ^bb0(%v: f32, %o: bf16):
    %t = arith.truncf %v : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<?x8xbf16>
  return %g, %r : tensor<?x8xf32>, tensor<?x8xbf16>
}

// An op written by halves (RoPE's shape once canonicalized: each half reads both halves of
// the widened input, is written into an empty tensor and inserted into the result, which
// is rounded): the widening moves through the
// slices and the rounding through the assembly, so each half's generic reads bf16 slices
// of the input and writes its bf16 half; no generic over the whole tensor is left.
// CHECK-LABEL: func.func @halves
// CHECK-NOT: tensor<?x8xf32>
// CHECK-DAG: %[[LO:.*]] = tensor.extract_slice %arg0[0, 0] [%{{.*}}, 4] [1, 1] : tensor<?x8xbf16> to tensor<?x4xbf16>
// CHECK-DAG: %[[HI:.*]] = tensor.extract_slice %arg0[0, 4] [%{{.*}}, 4] [1, 1] : tensor<?x8xbf16> to tensor<?x4xbf16>
// CHECK-COUNT-2: linalg.generic {{.*}} ins(%[[LO]], %[[HI]] : tensor<?x4xbf16>, tensor<?x4xbf16>) outs(%{{.*}} : tensor<?x4xbf16>)
// CHECK-NOT: linalg.generic
// CHECK: tensor.insert_slice %{{.*}} into %{{.*}}[0, 0] [%{{.*}}, 4] [1, 1] : tensor<?x4xbf16> into tensor<?x8xbf16>
// CHECK: tensor.insert_slice %{{.*}} into %{{.*}}[0, 4] [%{{.*}}, 4] [1, 1] : tensor<?x4xbf16> into tensor<?x8xbf16>
// CHECK-NOT: tensor<?x8xf32>
// CHECK: return
func.func @halves(%x: tensor<?x8xbf16>) -> tensor<?x8xbf16> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?x8xbf16>
  %ef = tensor.empty(%n) : tensor<?x8xf32>
  %w = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<?x8xbf16>) outs(%ef : tensor<?x8xf32>) {
  ^bb0(%a: bf16, %o: f32):
    %e = arith.extf %a : bf16 to f32
    linalg.yield %e : f32
  } -> tensor<?x8xf32>
  %x1 = tensor.extract_slice %w[0, 0] [%n, 4] [1, 1] : tensor<?x8xf32> to tensor<?x4xf32>
  %x2 = tensor.extract_slice %w[0, 4] [%n, 4] [1, 1] : tensor<?x8xf32> to tensor<?x4xf32>
  %out = tensor.empty(%n) : tensor<?x8xf32>
  %d1 = tensor.empty(%n) : tensor<?x4xf32>
  %lo = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x1, %x2 : tensor<?x4xf32>, tensor<?x4xf32>) outs(%d1 : tensor<?x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.subf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<?x4xf32>
  %i0 = tensor.insert_slice %lo into %out[0, 0] [%n, 4] [1, 1] : tensor<?x4xf32> into tensor<?x8xf32>
  %d2 = tensor.empty(%n) : tensor<?x4xf32>
  %hi = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x1, %x2 : tensor<?x4xf32>, tensor<?x4xf32>) outs(%d2 : tensor<?x4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<?x4xf32>
  %i1 = tensor.insert_slice %hi into %i0[0, 4] [%n, 4] [1, 1] : tensor<?x4xf32> into tensor<?x8xf32>
  %eh = tensor.empty(%n) : tensor<?x8xbf16>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%i1 : tensor<?x8xf32>) outs(%eh : tensor<?x8xbf16>) {
  ^bb0(%a: f32, %o: bf16):
    %t = arith.truncf %a : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<?x8xbf16>
  return %r : tensor<?x8xbf16>
}

// The same assembly also returned in f32: the rounding stays one generic over the whole
// tensor (moving it through the assembly would round the parts and keep them too).
// CHECK-LABEL: func.func @halves_kept
// CHECK: tensor.insert_slice %{{.*}} : tensor<?x4xf32> into tensor<?x8xf32>
// CHECK: linalg.generic {{.*}} ins(%{{.*}} : tensor<?x8xf32>) outs(%{{.*}} : tensor<?x8xbf16>)
// CHECK: arith.truncf
// CHECK-NOT: tensor<?x4xbf16>
// CHECK: return
func.func @halves_kept(%x: tensor<?x4xf32>, %y: tensor<?x4xf32>) -> (tensor<?x8xbf16>, tensor<?x8xf32>) {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?x4xf32>
  %out = tensor.empty(%n) : tensor<?x8xf32>
  %i0 = tensor.insert_slice %x into %out[0, 0] [%n, 4] [1, 1] : tensor<?x4xf32> into tensor<?x8xf32>
  %i1 = tensor.insert_slice %y into %i0[0, 4] [%n, 4] [1, 1] : tensor<?x4xf32> into tensor<?x8xf32>
  %eh = tensor.empty(%n) : tensor<?x8xbf16>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%i1 : tensor<?x8xf32>) outs(%eh : tensor<?x8xbf16>) {
  ^bb0(%a: f32, %o: bf16):
    %t = arith.truncf %a : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<?x8xbf16>
  return %r, %i1 : tensor<?x8xbf16>, tensor<?x8xf32>
}
