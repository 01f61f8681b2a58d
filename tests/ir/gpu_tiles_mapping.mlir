// The CUDA pipeline's tiled IR (block and thread scf.foralls, qkv.workgroup buffers) taken
// two ways: qkv-map-tiles-to-gpu onto a gpu.launch (grid from the block forall's trip
// counts, dynamic ones too; threads from the longest thread forall; a barrier after each
// thread forall; the marked allocas as workgroup attributions), and
// qkv-tiles-to-cpu-loops onto the CPU (blocks an scf.parallel, threads scf.for loops, a
// thread's own static allocas moved to the block's body, reused by the threads in turn).
// RUN: qkv-opt %s --pass-pipeline="builtin.module(func.func(qkv-map-tiles-to-gpu))" | FileCheck %s --check-prefix=GPU
// RUN: qkv-opt %s --pass-pipeline="builtin.module(func.func(qkv-tiles-to-cpu-loops))" | FileCheck %s --check-prefix=CPU

// GPU-LABEL: func.func @tiles
// GPU: gpu.launch blocks(%[[BX:.*]], %[[BY:.*]], %{{.*}}) in (%{{.*}} = %[[N:.*]], %{{.*}} = %c3{{.*}}, %{{.*}} = %c1{{.*}}) threads(%{{.*}}) in (%{{.*}} = %c8{{.*}}, %{{.*}} = %c1{{.*}}, %{{.*}} = %c1{{.*}}) workgroup(%[[WG:.*]] : memref<8xf32, #gpu.address_space<workgroup>>)
// GPU-NOT: memref.alloca() {{.*}}qkv.workgroup
// GPU: memref.alloca() : memref<4xf32>
// GPU: memref.store %{{.*}}, %[[WG]][%{{.*}}] : memref<8xf32, #gpu.address_space<workgroup>>
// GPU: gpu.barrier
// GPU: memref.alloca() : memref<2xf32>
// GPU: memref.load %[[WG]]
// GPU: gpu.barrier
// GPU: gpu.terminator
// CPU-LABEL: func.func @tiles
// CPU: scf.parallel (%[[I:.*]], %[[J:.*]]) = (%c0{{.*}}, %c0{{.*}}) to (%{{.*}}, %c3{{.*}}) step
// CPU-NEXT: memref.alloca() : memref<2xf32>
// CPU-NEXT: memref.alloca() {qkv.workgroup} : memref<8xf32>
// CPU: scf.for %{{.*}} = %c0{{.*}} to %c8{{.*}} step
// CPU: memref.store
// CPU: scf.for %{{.*}} = %c0{{.*}} to %c8{{.*}} step
// CPU-NOT: memref.alloca
// CPU: memref.load
// CPU-NOT: scf.forall
func.func @tiles(%n: index, %out: memref<?x3x8xf32>) {
  scf.forall (%i, %j) in (%n, 3) {
    %wg = memref.alloca() {qkv.workgroup} : memref<8xf32>
    %private = memref.alloca() : memref<4xf32>
    scf.forall (%t) in (8) {
      %x = arith.index_cast %t : index to i32
      %f = arith.sitofp %x : i32 to f32
      memref.store %f, %wg[%t] : memref<8xf32>
    } {mapping = [#gpu.thread<x>]}
    scf.forall (%t) in (8) {
      %own = memref.alloca() : memref<2xf32>
      %c7 = arith.constant 7 : index
      %r = arith.subi %c7, %t : index
      %v = memref.load %wg[%r] : memref<8xf32>
      memref.store %v, %out[%i, %j, %t] : memref<?x3x8xf32>
    } {mapping = [#gpu.thread<x>]}
  } {mapping = [#gpu.block<x>, #gpu.block<y>]}
  return
}
