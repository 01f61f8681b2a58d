// qkv-serialize-small-parallel (docs/compiler.md, "Threads"): an omp.parallel region forks
// only when its loop's trips times its body's counted ops reach min-work; else it runs on
// the calling thread. A body whose work the count cannot see (a call, a loop of unknown
// length) keeps its fork, as does one worth it whatever the sizes.
// RUN: qkv-opt %s --pass-pipeline="builtin.module(convert-scf-to-openmp{num-threads=2},qkv-serialize-small-parallel{min-work=1000},canonicalize)" | FileCheck %s

// Rows of 64 vectors: the trips (n, bound at run time) times the body's count, compared
// with min-work before the region.
// CHECK-LABEL: func.func @rows(
// CHECK-SAME: %{{.*}}: memref<?x512xf32>, %[[N:.*]]: index)
// CHECK: %[[TRIPS:.*]] = arith.maxsi %[[N]], %c0
// CHECK: %[[WORK:.*]] = arith.muli %[[TRIPS]], %[[PER:c[0-9]+]]
// CHECK: %[[WORTH:.*]] = arith.cmpi sge, %[[WORK]], %c1000
// CHECK: omp.parallel if(%[[WORTH]])
func.func @rows(%m: memref<?x512xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c512 = arith.constant 512 : index
  %z = arith.constant dense<0.0> : vector<8xf32>
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    scf.for %j = %c0 to %c512 step %c8 {
      vector.store %z, %m[%i, %j] : memref<?x512xf32>, vector<8xf32>
    }
    scf.reduce
  }
  return
}

// Static sizes: 32 trips of a few ops never fork (if false); 2 x 4096 trips of a store
// always do (no clause).
// CHECK-LABEL: func.func @static_sizes(
// CHECK: omp.parallel if(%false)
// CHECK: omp.parallel num_threads
func.func @static_sizes(%t: memref<32xf32>, %big: memref<2x4096xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c32 = arith.constant 32 : index
  %c4096 = arith.constant 4096 : index
  %x = arith.constant 1.0 : f32
  scf.parallel (%i) = (%c0) to (%c32) step (%c1) {
    %e = math.exp %x : f32
    memref.store %e, %t[%i] : memref<32xf32>
    scf.reduce
  }
  scf.parallel (%i, %j) = (%c0, %c0) to (%c2, %c4096) step (%c1, %c1) {
    memref.store %x, %big[%i, %j] : memref<2x4096xf32>
    scf.reduce
  }
  return
}

// An scf.if counts as its larger branch, not both: 40 trips of about 20 stay under
// min-work (both branches added, about 38 a trip, would not).
// CHECK-LABEL: func.func @branches(
// CHECK: omp.parallel if(%false)
func.func @branches(%t: memref<40xf32>, %c: i1) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c40 = arith.constant 40 : index
  %x = arith.constant 1.0 : f32
  scf.parallel (%i) = (%c0) to (%c40) step (%c1) {
    scf.if %c {
      scf.for %j = %c0 to %c8 step %c1 {
        memref.store %x, %t[%i] : memref<40xf32>
      }
    } else {
      scf.for %j = %c0 to %c8 step %c1 {
        memref.store %x, %t[%j] : memref<40xf32>
      }
    }
    scf.reduce
  }
  return
}

// Work the count cannot see: a call, a loop of unknown length.
// CHECK-LABEL: func.func @unseen(
// CHECK-NOT: if(
// CHECK: return
func.func private @task(index)
func.func @unseen(%m: memref<?xf32>, %n: index, %k: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %x = arith.constant 1.0 : f32
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    func.call @task(%i) : (index) -> ()
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    scf.for %j = %c0 to %k step %c1 {
      memref.store %x, %m[%j] : memref<?xf32>
    }
    scf.reduce
  }
  return
}
