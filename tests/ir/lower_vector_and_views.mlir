// qkv-lower-vector-and-views (docs/compiler.md, "The CPU pipeline"): the vector lowering
// patterns of upstream convert-vector-to-llvm and expand-strided-metadata's patterns in one
// greedy walk that does not simplify regions.
// RUN: qkv-opt %s --qkv-lower-vector-and-views | FileCheck %s
// RUN: qkv-opt %s --qkv-lower-vector-and-views=outer-product=true | FileCheck %s --check-prefix=OUTER

// A 2-D vector becomes 1-D pieces.
// CHECK-LABEL: func.func @shape(
// CHECK-NOT: vector.shape_cast
// CHECK: vector.extract %{{.*}}[0] : vector<8xf32> from vector<2x8xf32>
// CHECK: vector.shuffle
func.func @shape(%v: vector<2x8xf32>) -> vector<16xf32> {
  %s = vector.shape_cast %v : vector<2x8xf32> to vector<16xf32>
  return %s : vector<16xf32>
}

// A mask is materialized as a compare with 32-bit indices.
// CHECK-LABEL: func.func @mask(
// CHECK-NOT: vector.create_mask
// CHECK: %[[N:.*]] = arith.index_cast %{{.*}} : index to i32
// CHECK: %[[S:.*]] = vector.broadcast %[[N]] : i32 to vector<16xi32>
// CHECK: %[[K:.*]] = arith.cmpi sgt, %[[S]], %{{.*}} : vector<16xi32>
// CHECK: vector.maskedstore %{{.*}}, %[[K]]
func.func @mask(%n: index, %m: memref<?xf32>, %p: vector<16xf32>) {
  %c0 = arith.constant 0 : index
  %k = vector.create_mask %n : vector<16xi1>
  vector.maskedstore %m[%c0], %k, %p : memref<?xf32>, vector<16xi1>, vector<16xf32>
  return
}

// A view becomes its strided metadata and a reinterpret cast at the computed offset.
// CHECK-LABEL: func.func @view(
// CHECK-NOT: memref.subview
// CHECK: %[[BASE:.*]], %{{.*}}, %{{.*}}:2, %{{.*}}:2 = memref.extract_strided_metadata
// CHECK: %[[OFF:.*]] = affine.apply
// CHECK: %[[R:.*]] = memref.reinterpret_cast %[[BASE]] to offset: [%[[OFF]]], sizes: [4, 16], strides: [64, 1]
// CHECK: vector.load %[[R]]
func.func @view(%m: memref<64x64xf32>, %i: index) -> vector<16xf32> {
  %c0 = arith.constant 0 : index
  %s = memref.subview %m[%i, 0] [4, 16] [1, 1] : memref<64x64xf32> to memref<4x16xf32, strided<[64, 1], offset: ?>>
  %v = vector.load %s[%c0, %c0] : memref<4x16xf32, strided<[64, 1], offset: ?>>, vector<16xf32>
  return %v : vector<16xf32>
}

// Contractions become dot products by default, outer products (FMAs of broadcasts) with
// outer-product.
// CHECK-LABEL: func.func @contract(
// CHECK-NOT: vector.contract
// CHECK-NOT: vector.fma
// CHECK: return
// OUTER-LABEL: func.func @contract(
// OUTER-NOT: vector.contract
// OUTER: vector.fma
func.func @contract(%a: vector<2x4xf32>, %b: vector<4x3xf32>, %c: vector<2x3xf32>) -> vector<2x3xf32> {
  %r = vector.contract {indexing_maps = [affine_map<(i, j, k) -> (i, k)>, affine_map<(i, j, k) -> (k, j)>, affine_map<(i, j, k) -> (i, j)>], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>} %a, %b, %c : vector<2x4xf32>, vector<4x3xf32> into vector<2x3xf32>
  return %r : vector<2x3xf32>
}

// Regions are not simplified: a block argument nothing reads stays (canonicalize would
// drop it).
// CHECK-LABEL: func.func @keep_blocks(
// CHECK: ^bb1(%{{.*}}: i32):
func.func @keep_blocks(%c: i1, %a: i32) -> i32 {
  cf.cond_br %c, ^bb1(%a : i32), ^bb1(%a : i32)
^bb1(%x: i32):
  return %a : i32
}
