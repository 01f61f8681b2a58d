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

// A warp forall (#gpu.warp<x>, warp-level code): on the GPU, 32 threads per warp (here 2
// warps: 64 threads, more than the thread forall's 16), the body run by each warp's lanes
// together (warp id = thread id / 32), a barrier after it; on the CPU, a loop over the
// warps, the body once per warp.
// GPU-LABEL: func.func @warps
// GPU: gpu.launch {{.*}} threads(%{{.*}}) in (%{{.*}} = %c64{{.*}}, %{{.*}} = %c1{{.*}}, %{{.*}} = %c1{{.*}})
// GPU: gpu.barrier
// GPU: affine.apply #{{.*}}()[%{{.*}}]
// GPU: vector.transfer_read
// GPU: gpu.barrier
// CPU-LABEL: func.func @warps
// CPU: scf.parallel
// CPU: scf.for %{{.*}} = %c0{{.*}} to %c16{{.*}} step
// CPU: scf.for %[[W:.*]] = %c0{{.*}} to %c2{{.*}} step
// CPU: vector.transfer_read %{{.*}}[%[[W]], %c0{{.*}}]
// CPU-NOT: scf.forall
func.func @warps(%n: index, %out: memref<?x2x8xf32>) {
  scf.forall (%i) in (%n) {
    %wg = memref.alloca() {qkv.workgroup} : memref<16x8xf32>
    scf.forall (%t) in (16) {
      %x = arith.index_cast %t : index to i32
      %f = arith.sitofp %x : i32 to f32
      %v = vector.broadcast %f : f32 to vector<8xf32>
      %z = arith.constant 0 : index
      vector.transfer_write %v, %wg[%t, %z] {in_bounds = [true]} : vector<8xf32>, memref<16x8xf32>
    } {mapping = [#gpu.thread<x>]}
    scf.forall (%w) in (2) {
      %c0 = arith.constant 0 : index
      %pad = arith.constant 0.0 : f32
      %row = vector.transfer_read %wg[%w, %c0], %pad {in_bounds = [true]} : memref<16x8xf32>, vector<8xf32>
      vector.transfer_write %row, %out[%i, %w, %c0] {in_bounds = [true]} : vector<8xf32>, memref<?x2x8xf32>
    } {mapping = [#gpu.warp<x>]}
  } {mapping = [#gpu.block<x>]}
  return
}
