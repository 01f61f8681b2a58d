// qkv-lower-attention-to-flash: the decode kernel's row groups where one row's output does not
// fit in the vector registers (AVX2's 16: Dh = 128 is 16 vectors of 8 lanes).
// RUN: qkv-opt %s --pass-pipeline="builtin.module(qkv-lower-attention-to-flash{vector-bits=256},canonicalize,cse)" | FileCheck %s

// Four queries per kv head share each key's and value's loads as one group of four rows;
// their values run in eight passes over the tile's keys, each for two vectors (16 columns)
// of the four rows' outputs: eight accumulators, one value vector and four broadcasts fit
// in the registers. Only the first pass prefetches the next tile's value rows (all eight
// lines of each: one group takes the whole share).
// CHECK-LABEL: func.func @decode_value_passes
// CHECK: %[[V:.*]] = bufferization.to_buffer %arg2
// CHECK: scf.for %{{.*}} = %c0 to %{{.*}} step %c1 iter_args(%{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// CHECK: scf.for %[[LINE:.*]] = %c0 to %c8 step %c1
// CHECK-NEXT: %[[COL:.*]] = arith.muli %[[LINE]], %c16 : index
// CHECK-NEXT: memref.prefetch %[[V]][%c0, %{{.*}}, %{{.*}}, %[[COL]]], read, locality<2>, data
// CHECK: vector.load %[[V]][%c0, %{{.*}}, %{{.*}}, %c0]
// CHECK-COUNT-4: vector.fma
// CHECK: vector.load %[[V]][%c0, %{{.*}}, %{{.*}}, %c8]
// CHECK-COUNT-4: vector.fma
// CHECK-NOT: memref.prefetch
// CHECK: scf.for %{{.*}} = %c0 to %{{.*}} step %c1 iter_args(%{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// CHECK-NOT: memref.prefetch
// CHECK: vector.load %[[V]][%c0, %{{.*}}, %{{.*}}, %c16]
// CHECK-COUNT-4: vector.fma
// CHECK: vector.load %[[V]][%c0, %{{.*}}, %{{.*}}, %c24]
// CHECK-COUNT-4: vector.fma
// CHECK-NOT: memref.prefetch
// CHECK: scf.for %{{.*}} = %c0 to %{{.*}} step %c1 iter_args(%{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// CHECK-NOT: memref.prefetch
// CHECK: vector.load %[[V]][%c0, %{{.*}}, %{{.*}}, %c32]
// CHECK-COUNT-4: vector.fma
// CHECK: vector.load %[[V]][%c0, %{{.*}}, %{{.*}}, %c40]
// CHECK-COUNT-4: vector.fma
// CHECK-NOT: memref.prefetch
// CHECK: scf.for %{{.*}} = %c0 to %{{.*}} step %c1 iter_args(%{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// CHECK-NOT: memref.prefetch
// CHECK: vector.load %[[V]][%c0, %{{.*}}, %{{.*}}, %c48]
// CHECK-COUNT-4: vector.fma
// CHECK: vector.load %[[V]][%c0, %{{.*}}, %{{.*}}, %c56]
// CHECK-COUNT-4: vector.fma
// CHECK-NOT: memref.prefetch
// CHECK: scf.for %{{.*}} = %c0 to %{{.*}} step %c1 iter_args(%{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// CHECK-NOT: memref.prefetch
// CHECK: vector.load %[[V]][%c0, %{{.*}}, %{{.*}}, %c64]
// CHECK-COUNT-4: vector.fma
// CHECK: vector.load %[[V]][%c0, %{{.*}}, %{{.*}}, %c72]
// CHECK-COUNT-4: vector.fma
// CHECK-NOT: memref.prefetch
// CHECK: scf.for %{{.*}} = %c0 to %{{.*}} step %c1 iter_args(%{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// CHECK-NOT: memref.prefetch
// CHECK: vector.load %[[V]][%c0, %{{.*}}, %{{.*}}, %c80]
// CHECK-COUNT-4: vector.fma
// CHECK: vector.load %[[V]][%c0, %{{.*}}, %{{.*}}, %c88]
// CHECK-COUNT-4: vector.fma
// CHECK-NOT: memref.prefetch
// CHECK: scf.for %{{.*}} = %c0 to %{{.*}} step %c1 iter_args(%{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// CHECK-NOT: memref.prefetch
// CHECK: vector.load %[[V]][%c0, %{{.*}}, %{{.*}}, %c96]
// CHECK-COUNT-4: vector.fma
// CHECK: vector.load %[[V]][%c0, %{{.*}}, %{{.*}}, %c104]
// CHECK-COUNT-4: vector.fma
// CHECK-NOT: memref.prefetch
// CHECK: scf.for %{{.*}} = %c0 to %{{.*}} step %c1 iter_args(%{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}}) -> (vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>, vector<8xf32>)
// CHECK-NOT: memref.prefetch
// CHECK: vector.load %[[V]][%c0, %{{.*}}, %{{.*}}, %c112]
// CHECK-COUNT-4: vector.fma
// CHECK: vector.load %[[V]][%c0, %{{.*}}, %{{.*}}, %c120]
// CHECK-COUNT-4: vector.fma
// CHECK-NOT: memref.prefetch
// CHECK-NOT: vector.fma
// CHECK: return
func.func @decode_value_passes(%q: tensor<1x2x4x128xf32>, %k: tensor<1x2x?x128xf32>, %v: tensor<1x2x?x128xf32>) -> tensor<1x2x4x128xf32> {
  %a = qkv.attention %q, %k, %v : tensor<1x2x4x128xf32>, tensor<1x2x?x128xf32>, tensor<1x2x?x128xf32> -> tensor<1x2x4x128xf32>
  return %a : tensor<1x2x4x128xf32>
}
