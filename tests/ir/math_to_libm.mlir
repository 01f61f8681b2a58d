// qkv-math-to-libm (docs/compiler.md, "The CPU pipeline"): upstream's convert-math-to-libm
// where a module still holds a math op after convert-math-to-llvm (f64 erf has no LLVM
// intrinsic); a module without one is not looked at.
// RUN: qkv-opt %s --split-input-file --pass-pipeline="builtin.module(qkv-math-to-libm)" | FileCheck %s

// CHECK: func.func private @erf(f64) -> f64
// CHECK-LABEL: func.func @erf64(
// CHECK-NOT: math.erf
// CHECK: call @erf(%{{.*}}) : (f64) -> f64
func.func @erf64(%x: f64) -> f64 {
  %y = math.erf %x : f64
  return %y : f64
}

// -----

// No math op: nothing declared, nothing changed.
// CHECK-LABEL: func.func @plain(
// CHECK-NOT: @erf
func.func @plain(%x: f64) -> f64 {
  %y = arith.addf %x, %x : f64
  return %y : f64
}
