// qkv-lower-attention-to-flash: block maps from the data. A mask that loads a captured
// integer tensor at a range of positions (packed documents: doc[b, q] == doc[b, kv]) gets
// range tables built from this call's values before the kernel (sparse tables of the
// min and max of every 2^k run along the last dim); each tile's interval evaluation reads
// the min and max of its rows and of its keys from them in two loads each, so tiles
// across documents are skipped and tiles within one run without mask code. The tiled
// kernel counts its tiles (all, computed, without mask code) per task and adds them to
// the op's slots of @qkv_tile_counts once per task.
// RUN: qkv-opt %s --pass-pipeline="builtin.module(qkv-lower-attention-to-flash{vector-bits=256 q-tile=16 kv-tile=16},canonicalize,cse)" | FileCheck %s

// CHECK: memref.global "public" @qkv_tile_counts : memref<3xi64> = dense<0>
// CHECK: llvm.mlir.global external constant @qkv_attentions(
// CHECK-LABEL: func.func @packed
// the tables: levels = 64 - ctlz(n), (levels, 1 row, n) of min and of max
// CHECK: %[[N:.*]] = tensor.dim %arg3, %c1 : tensor<1x?xi32>
// CHECK: %[[N1:.*]] = arith.maxsi %[[N]], %c1 : index
// CHECK: %[[CLZ:.*]] = math.ctlz %{{.*}} : i64
// CHECK: %[[LEVELS:.*]] = arith.subi %c64, %{{.*}} : index
// CHECK: %[[MIN:.*]] = memref.alloc(%[[LEVELS]], %[[N1]]) : memref<?x1x?xi32>
// CHECK: %[[MAX:.*]] = memref.alloc(%[[LEVELS]], %[[N1]]) : memref<?x1x?xi32>
// level 0: the values
// CHECK: scf.for %[[I:.*]] = %c0 to %[[N]] step %c1 {
// CHECK: %[[X:.*]] = tensor.extract %arg3[%c0, %[[I]]] : tensor<1x?xi32>
// CHECK: memref.store %[[X]], %[[MIN]][%c0, %c0, %[[I]]]
// level k from level k - 1 at i and i + 2^(k-1)
// CHECK: scf.for %[[K:.*]] = %c1 to %[[LEVELS]] step %c1 {
// CHECK: %[[PREV:.*]] = arith.subi %[[K]], %c1 : index
// CHECK: %[[HALF:.*]] = arith.shli %c1, %[[PREV]] : index
// CHECK: arith.minsi
// CHECK: arith.maxsi
// CHECK: memref.store %{{.*}}, %[[MIN]][%[[K]], %c0, %{{.*}}]
// the tile counts' global, then the kernels
// CHECK: %[[COUNTS:.*]] = memref.get_global @qkv_tile_counts : memref<3xi64>
// in the tiled kernel's tasks: a range [lo, hi] of keys (or queries), clamped to the row,
// is covered by the runs of 2^k from lo and to hi, k = 63 - ctlz(hi - lo + 1)
// CHECK: %[[TASKCOUNTS:.*]] = memref.alloca() {alignment = 64 : i64} : memref<3xi64>
// CHECK: %[[LEN:.*]] = arith.addi %{{.*}}, %c1 : index
// CHECK: %[[LEN64:.*]] = arith.index_cast %[[LEN]] : index to i64
// CHECK: %[[Z:.*]] = math.ctlz %[[LEN64]] : i64
// CHECK: %[[ZI:.*]] = arith.index_cast %[[Z]] : i64 to index
// CHECK: %[[LK:.*]] = arith.subi %c63, %[[ZI]] : index
// CHECK: %[[SPAN:.*]] = arith.shli %c1, %[[LK]] : index
// CHECK: %[[A:.*]] = memref.load %[[MIN]][%[[LK]], %c0, %[[LO:.*]]] : memref<?x1x?xi32>
// CHECK: %[[B:.*]] = memref.load %[[MIN]][%[[LK]], %c0, %[[FROM:.*]]] : memref<?x1x?xi32>
// CHECK: arith.minsi %[[A]], %[[B]] : i32
// CHECK: memref.load %[[MAX]][%[[LK]], %c0, %[[LO]]] : memref<?x1x?xi32>
// CHECK: memref.load %[[MAX]][%[[LK]], %c0, %[[FROM]]] : memref<?x1x?xi32>
// each task adds its counts once
// CHECK: memref.atomic_rmw addi %{{.*}}, %[[COUNTS]][%c0] : (i64, memref<3xi64>) -> i64
// CHECK: memref.atomic_rmw addi %{{.*}}, %[[COUNTS]][%c1] : (i64, memref<3xi64>) -> i64
// CHECK: memref.atomic_rmw addi %{{.*}}, %[[COUNTS]][%c2] : (i64, memref<3xi64>) -> i64
// the tables are freed after the kernels
// CHECK: memref.dealloc %[[MIN]] : memref<?x1x?xi32>
// CHECK: memref.dealloc %[[MAX]] : memref<?x1x?xi32>
func.func @packed(%q: tensor<1x2x?x8xf32>, %k: tensor<1x2x?x8xf32>, %v: tensor<1x2x?x8xf32>, %doc: tensor<1x?xi32>) -> tensor<1x2x?x8xf32> {
  %a = qkv.attention %q, %k, %v captures(%doc : tensor<1x?xi32>) : tensor<1x2x?x8xf32>, tensor<1x2x?x8xf32>, tensor<1x2x?x8xf32> -> tensor<1x2x?x8xf32>
    mask {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index, %d: tensor<1x?xi32>):
      %x = tensor.extract %d[%b, %qi] : tensor<1x?xi32>
      %y = tensor.extract %d[%b, %ki] : tensor<1x?xi32>
      %c = arith.cmpi eq, %x, %y : i32
      qkv.yield %c : i1
    }
  return %a : tensor<1x2x?x8xf32>
}
