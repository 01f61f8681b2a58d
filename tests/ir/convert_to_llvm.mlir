// qkv-convert-to-llvm (docs/compiler.md, "The CPU pipeline"): every dialect left to LLVM in
// one conversion, the loaded dialects' interfaces plus vector's patterns with qkv's options
// and x86vector's intrinsics.
// RUN: qkv-opt %s --qkv-convert-to-llvm | FileCheck %s

// A reduction LLVM may reassociate (vector's interface would make it an ordered chain).
// CHECK-LABEL: llvm.func @reduce(
// CHECK: "llvm.intr.vector.reduce.fadd"(%{{.*}}, %{{.*}}) <{fastmathFlags = #llvm.fastmath<reassoc>}>
func.func @reduce(%v: vector<16xf32>) -> f32 {
  %r = vector.reduction <add>, %v : vector<16xf32> into f32
  return %r : f32
}

// x86vector, which has no conversion interface, to its intrinsic.
// CHECK-LABEL: llvm.func @dot(
// CHECK: llvm.call_intrinsic "llvm.x86.avx512bf16.dpbf16ps.512"
func.func @dot(%acc: vector<16xf32>, %a: vector<32xbf16>, %b: vector<32xbf16>) -> vector<16xf32> {
  %r = x86vector.avx512.dot %acc, %a, %b : vector<32xbf16> -> vector<16xf32>
  return %r : vector<16xf32>
}

// An AMX tile carried through a cf loop: amx's ops, its type and the branches in the same
// walk.
// CHECK-LABEL: llvm.func @tiles(
// CHECK: %[[Z:.*]] = llvm.call_intrinsic "llvm.x86.tilezero.internal"
// CHECK: llvm.br ^bb1(%{{.*}}, %[[Z]] : i64, !llvm.x86_amx)
// CHECK: ^bb1(%{{.*}}: i64, %[[T:.*]]: !llvm.x86_amx):
// CHECK: llvm.cond_br
// CHECK: llvm.call_intrinsic "llvm.x86.tilestored64.internal"(%{{.*}}, %[[T]])
// CHECK-NOT: amx.
// CHECK-NOT: cf.
func.func @tiles(%m: memref<16x16xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %z = amx.tile_zero : !amx.tile<16x16xf32>
  cf.br ^loop(%c0, %z : index, !amx.tile<16x16xf32>)
^loop(%i: index, %t: !amx.tile<16x16xf32>):
  %more = arith.cmpi slt, %i, %n : index
  %next = arith.addi %i, %c1 : index
  cf.cond_br %more, ^loop(%next, %t : index, !amx.tile<16x16xf32>), ^done
^done:
  amx.tile_store %m[%c0, %c0], %t : memref<16x16xf32>, !amx.tile<16x16xf32>
  return
}
