// qkv-expand-bf16-conversions: bf16 rounding and widening as integer ops of the same shape
// (what LLVM vectorizes), instead of a __truncsfbf2 call per element on CPUs without bf16
// converts.
// RUN: qkv-opt %s --qkv-expand-bf16-conversions | FileCheck %s

// Round to nearest even: the f32 bits plus 0x7fff plus the lowest kept bit, shifted right by
// 16; NaNs become a quiet NaN.
// CHECK-LABEL: func.func @round
// CHECK-NOT: arith.truncf
// CHECK-DAG: %[[NAN:.*]] = arith.cmpf une, %arg0, %arg0 : vector<8xf32>
// CHECK-DAG: %[[BITS:.*]] = arith.bitcast %arg0 : vector<8xf32> to vector<8xi32>
// CHECK: %[[LOW:.*]] = arith.shrui %[[BITS]]
// CHECK: %[[ODD:.*]] = arith.andi %[[LOW]]
// CHECK: %[[BIAS:.*]] = arith.addi %[[ODD]]
// CHECK: %[[SUM:.*]] = arith.addi %[[BITS]], %[[BIAS]]
// CHECK: %[[HIGH:.*]] = arith.shrui %[[SUM]]
// CHECK: %[[NARROW:.*]] = arith.trunci %[[HIGH]] : vector<8xi32> to vector<8xi16>
// CHECK: %[[SEL:.*]] = arith.select %[[NAN]], %{{.*}}, %[[NARROW]]
// CHECK: arith.bitcast %[[SEL]] : vector<8xi16> to vector<8xbf16>
// CHECK-NOT: arith.truncf
func.func @round(%x: vector<8xf32>) -> vector<8xbf16> {
  %r = arith.truncf %x : vector<8xf32> to vector<8xbf16>
  return %r : vector<8xbf16>
}

// Widening: the bits shifted left by 16.
// CHECK-LABEL: func.func @widen
// CHECK-NOT: arith.extf
// CHECK: %[[H:.*]] = arith.bitcast %arg0 : bf16 to i16
// CHECK: %[[W:.*]] = arith.extui %[[H]] : i16 to i32
// CHECK: %[[S:.*]] = arith.shli %[[W]]
// CHECK: arith.bitcast %[[S]] : i32 to f32
func.func @widen(%x: bf16) -> f32 {
  %r = arith.extf %x : bf16 to f32
  return %r : f32
}

// Other conversions stay.
// CHECK-LABEL: func.func @f16
// CHECK: arith.truncf %arg0 : vector<8xf32> to vector<8xf16>
func.func @f16(%x: vector<8xf32>) -> vector<8xf16> {
  %r = arith.truncf %x : vector<8xf32> to vector<8xf16>
  return %r : vector<8xf16>
}
