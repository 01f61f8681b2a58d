// qkv-lower-checks: each qkv.check becomes scf.if (not ok) around a call of
// qkv_check_failed(site, count, 16 values padded with 0), declared once per module.
// RUN: qkv-opt %s --qkv-lower-checks | FileCheck %s
// RUN: qkv-opt %s --qkv-lower-checks --split-input-file | FileCheck %s --check-prefix=NONE

// CHECK: func.func private @qkv_check_failed(i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64)
// CHECK-LABEL: func.func @two_checks
// CHECK-SAME: (%[[OK:.*]]: i1, %[[B:.*]]: index, %[[I:.*]]: index, %[[N:.*]]: index)
// CHECK: %[[FAIL:.*]] = arith.xori %[[OK]], %true : i1
// CHECK-NEXT: scf.if %[[FAIL]] {
// CHECK-NEXT: %[[SITE:.*]] = arith.constant 3 : i64
// CHECK-NEXT: %[[COUNT:.*]] = arith.constant 6 : i64
// CHECK-NEXT: %[[V0:.*]] = arith.index_cast %[[B]] : index to i64
// CHECK-COUNT-3: arith.index_cast %[[B]] : index to i64
// CHECK-NEXT: %[[VI:.*]] = arith.index_cast %[[I]] : index to i64
// CHECK-NEXT: %[[VN:.*]] = arith.index_cast %[[N]] : index to i64
// CHECK-NEXT: %[[ZERO:.*]] = arith.constant 0 : i64
// CHECK-NEXT: func.call @qkv_check_failed(%[[SITE]], %[[COUNT]], %[[V0]], %{{.*}}, %{{.*}}, %{{.*}}, %[[VI]], %[[VN]], %[[ZERO]], %[[ZERO]], %[[ZERO]], %[[ZERO]], %[[ZERO]], %[[ZERO]], %[[ZERO]], %[[ZERO]], %[[ZERO]], %[[ZERO]])
// CHECK: scf.if
// CHECK: arith.constant 4 : i64
// CHECK: func.call @qkv_check_failed
// CHECK-NOT: qkv.check
func.func @two_checks(%ok: i1, %b: index, %i: index, %n: index) {
  qkv.check %ok, site 3 [%b, %b, %b, %b, %i, %n]
  qkv.check %ok, site 4 [%b, %b, %b, %b, %i, %n]
  return
}

// -----

// A module without checks declares nothing.
// NONE-LABEL: func.func @no_checks
// NONE-NOT: qkv_check_failed
func.func @no_checks(%x: index) -> index {
  return %x : index
}
