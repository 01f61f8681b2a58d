// qkv-lower-matmul-to-microkernels on sibling matmuls: consecutive matmuls of one A (Q, K
// and V of one input; SwiGLU's gate and up), with nothing between them but the next one's
// start, run as one GEMM: one parallel loop whose tasks take their rows of every member
// in turn, each over its own share of that member's panels (docs/compiler.md, "The
// GEMM"). An epilogue of the last member that reads a sibling's result (SwiGLU written
// in place over its gate) is applied by the same task, on the block it wrote.
// RUN: qkv-opt %s --pass-pipeline="builtin.module(qkv-lower-matmul-to-microkernels{vector-bits=256 kc=32 mc=12},canonicalize,cse)" | FileCheck %s

// CHECK-LABEL: func.func @qkv(
// CHECK: scf.parallel
// CHECK: call @qkv_gemm_block_f32_6x16_k32_bias(
// CHECK: scf.if
// CHECK: call @qkv_gemm_block_f32_6x16_k32(
// CHECK: scf.if
// CHECK: call @qkv_gemm_block_f32_6x16_k32_bias(
// CHECK: scf.reduce
// CHECK-NOT: scf.parallel
// CHECK: return
func.func @qkv(%x: memref<?x8xf32> {qkv.name = "x"}, %wq: memref<8x70xf32> {qkv.name = "wq", qkv.param},
               %bq: memref<70xf32> {qkv.name = "bq", qkv.param}, %wk: memref<8x20xf32> {qkv.name = "wk", qkv.param},
               %wv: memref<8x20xf32> {qkv.name = "wv", qkv.param}, %bv: memref<20xf32> {qkv.name = "bv", qkv.param},
               %q: memref<?x70xf32>, %k: memref<?x20xf32>, %v: memref<?x20xf32>) attributes {llvm.emit_c_interface} {
  %zero = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%bq : memref<70xf32>) outs(%q : memref<?x70xf32>) {
  ^bb0(%b: f32, %o: f32):
    linalg.yield %b : f32
  }
  linalg.matmul ins(%x, %wq : memref<?x8xf32>, memref<8x70xf32>) outs(%q : memref<?x70xf32>)
  linalg.fill ins(%zero : f32) outs(%k : memref<?x20xf32>)
  linalg.matmul ins(%x, %wk : memref<?x8xf32>, memref<8x20xf32>) outs(%k : memref<?x20xf32>)
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%bv : memref<20xf32>) outs(%v : memref<?x20xf32>) {
  ^bb0(%b: f32, %o: f32):
    linalg.yield %b : f32
  }
  linalg.matmul ins(%x, %wv : memref<?x8xf32>, memref<8x20xf32>) outs(%v : memref<?x20xf32>)
  return
}

// SwiGLU over gate and up: the gate's product is written into the output (the generic
// was bufferized in place on it); up's product stays in its own buffer, and each task,
// after its rows of both, writes silu(gate) * up over its block of the output.
// CHECK-LABEL: func.func @swiglu(
// CHECK: %[[UP:.*]] = memref.alloc
// CHECK: scf.parallel
// CHECK: call @qkv_gemm_block_f32_6x16_k32(
// CHECK: call @qkv_gemm_block_f32_6x16_k32(
// CHECK: math.exp
// CHECK: scf.reduce
// CHECK-NOT: scf.parallel
// CHECK-NOT: linalg.generic
// CHECK: memref.dealloc %[[UP]]
func.func @swiglu(%h: memref<?x8xf32> {qkv.name = "h"}, %wg: memref<8x40xf32> {qkv.name = "wg", qkv.param},
                  %wu: memref<8x40xf32> {qkv.name = "wu", qkv.param}, %out: memref<?x40xf32>) attributes {llvm.emit_c_interface} {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %c0 = arith.constant 0 : index
  %m = memref.dim %h, %c0 : memref<?x8xf32>
  linalg.fill ins(%zero : f32) outs(%out : memref<?x40xf32>)
  linalg.matmul ins(%h, %wg : memref<?x8xf32>, memref<8x40xf32>) outs(%out : memref<?x40xf32>)
  %up = memref.alloc(%m) : memref<?x40xf32>
  linalg.fill ins(%zero : f32) outs(%up : memref<?x40xf32>)
  linalg.matmul ins(%h, %wu : memref<?x8xf32>, memref<8x40xf32>) outs(%up : memref<?x40xf32>)
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%out, %up : memref<?x40xf32>, memref<?x40xf32>) outs(%out : memref<?x40xf32>) {
  ^bb0(%g: f32, %u: f32, %o: f32):
    %n = arith.negf %g : f32
    %e = math.exp %n : f32
    %d = arith.addf %e, %one : f32
    %s = arith.divf %g, %d : f32
    %r = arith.mulf %s, %u : f32
    linalg.yield %r : f32
  }
  memref.dealloc %up : memref<?x40xf32>
  return
}

// Two matmuls of one A with a write between them (to the first one's result) stay two
// GEMMs, as do two of different As.
// CHECK-LABEL: func.func @apart(
// CHECK: scf.parallel
// CHECK-COUNT-2: call @qkv_gemm_
// CHECK-NOT: call @qkv_gemm_
// CHECK: linalg.generic
// CHECK: scf.parallel
// CHECK-COUNT-2: call @qkv_gemm_
// CHECK-NOT: call @qkv_gemm_
// CHECK: scf.parallel
// CHECK-COUNT-2: call @qkv_gemm_
// CHECK-NOT: scf.parallel
// CHECK: return
func.func @apart(%x: memref<?x8xf32> {qkv.name = "x"}, %y: memref<?x8xf32> {qkv.name = "y"},
                 %w0: memref<8x16xf32> {qkv.name = "w0", qkv.param}, %w1: memref<8x16xf32> {qkv.name = "w1", qkv.param},
                 %a: memref<?x16xf32>, %b: memref<?x16xf32>, %c: memref<?x16xf32>) attributes {llvm.emit_c_interface} {
  %zero = arith.constant 0.0 : f32
  %two = arith.constant 2.0 : f32
  linalg.matmul ins(%x, %w0 : memref<?x8xf32>, memref<8x16xf32>) outs(%a : memref<?x16xf32>)
  linalg.fill ins(%two : f32) outs(%c : memref<?x16xf32>)
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      outs(%a : memref<?x16xf32>) {
  ^bb0(%o: f32):
    %s = arith.mulf %o, %two : f32
    linalg.yield %s : f32
  }
  linalg.matmul ins(%x, %w1 : memref<?x8xf32>, memref<8x16xf32>) outs(%b : memref<?x16xf32>)
  linalg.matmul ins(%y, %w1 : memref<?x8xf32>, memref<8x16xf32>) outs(%c : memref<?x16xf32>)
  return
}

// A matmul of the same A whose B is a member's result waits for the group: the group of
// the two before it, then its own B packed (not a param) and its own GEMM.
// CHECK-LABEL: func.func @reads_a_sibling(
// CHECK: scf.parallel
// CHECK-COUNT-2: call @qkv_gemm_block_f32_6x16_k32(
// CHECK: scf.reduce
// CHECK: call @qkv_gemm_pack_b_f32_16(
// CHECK: scf.parallel
// CHECK: call @qkv_gemm_block_f32_6x16_k32(
// CHECK: return
func.func @reads_a_sibling(%x: memref<8x8xf32> {qkv.name = "x"}, %w0: memref<8x8xf32> {qkv.name = "w0", qkv.param},
                           %w1: memref<8x8xf32> {qkv.name = "w1", qkv.param}, %c1: memref<8x8xf32>,
                           %c2: memref<8x8xf32>, %c3: memref<8x8xf32>) attributes {llvm.emit_c_interface} {
  linalg.matmul ins(%x, %w0 : memref<8x8xf32>, memref<8x8xf32>) outs(%c1 : memref<8x8xf32>)
  linalg.matmul ins(%x, %w1 : memref<8x8xf32>, memref<8x8xf32>) outs(%c2 : memref<8x8xf32>)
  linalg.matmul ins(%x, %c1 : memref<8x8xf32>, memref<8x8xf32>) outs(%c3 : memref<8x8xf32>)
  return
}

// A bf16 graph's Q, K and V: each product rounded to bf16 by the elementwise op right
// after it (its epilogue), which sits between it and the next sibling. Each member's
// epilogue is taken when the next one joins: one parallel loop whose tasks round each
// member's block right after computing it; no generic left.
// CHECK-LABEL: func.func @rounded_siblings(
// CHECK: scf.parallel
// CHECK: call @qkv_gemm_block_bf16_f32_6x16_k32(
// CHECK: arith.truncf
// CHECK-NOT: scf.reduce
// CHECK: call @qkv_gemm_block_bf16_f32_6x16_k32(
// CHECK: arith.truncf
// CHECK-NOT: scf.reduce
// CHECK: call @qkv_gemm_block_bf16_f32_6x16_k32(
// CHECK: arith.truncf
// CHECK: scf.reduce
// CHECK-NOT: scf.parallel
// CHECK-NOT: linalg.generic
// CHECK: return
func.func @rounded_siblings(%x: memref<?x8xbf16> {qkv.name = "x"}, %wq: memref<8x40xbf16> {qkv.name = "wq", qkv.param},
                            %wk: memref<8x40xbf16> {qkv.name = "wk", qkv.param}, %wv: memref<8x24xbf16> {qkv.name = "wv", qkv.param},
                            %q: memref<?x40xbf16>, %k: memref<?x40xbf16>, %v: memref<?x24xbf16>) attributes {llvm.emit_c_interface} {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %m = memref.dim %x, %c0 : memref<?x8xbf16>
  %cq = memref.alloc(%m) : memref<?x40xf32>
  linalg.fill ins(%zero : f32) outs(%cq : memref<?x40xf32>)
  linalg.matmul ins(%x, %wq : memref<?x8xbf16>, memref<8x40xbf16>) outs(%cq : memref<?x40xf32>)
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%cq : memref<?x40xf32>) outs(%q : memref<?x40xbf16>) {
  ^bb0(%in: f32, %o: bf16):
    %r = arith.truncf %in : f32 to bf16
    linalg.yield %r : bf16
  }
  %ck = memref.alloc(%m) : memref<?x40xf32>
  linalg.fill ins(%zero : f32) outs(%ck : memref<?x40xf32>)
  linalg.matmul ins(%x, %wk : memref<?x8xbf16>, memref<8x40xbf16>) outs(%ck : memref<?x40xf32>)
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%ck : memref<?x40xf32>) outs(%k : memref<?x40xbf16>) {
  ^bb0(%in: f32, %o: bf16):
    %r = arith.truncf %in : f32 to bf16
    linalg.yield %r : bf16
  }
  %cv = memref.alloc(%m) : memref<?x24xf32>
  linalg.fill ins(%zero : f32) outs(%cv : memref<?x24xf32>)
  linalg.matmul ins(%x, %wv : memref<?x8xbf16>, memref<8x24xbf16>) outs(%cv : memref<?x24xf32>)
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%cv : memref<?x24xf32>) outs(%v : memref<?x24xbf16>) {
  ^bb0(%in: f32, %o: bf16):
    %r = arith.truncf %in : f32 to bf16
    linalg.yield %r : bf16
  }
  return
}

// An epilogue whose output the next matmul reads (here as its B, through a cast: a view
// of it) would be written by some tasks while others read it: the two stay two GEMMs,
// the first one's rounding its own epilogue.
// CHECK-LABEL: func.func @rounding_read_next(
// CHECK: scf.parallel
// CHECK: call @qkv_gemm_block_bf16_f32_6x16_k32(
// CHECK: arith.truncf
// CHECK: scf.reduce
// CHECK: call @qkv_gemm_pack_b_bf16_f32_16(
// CHECK: scf.parallel
// CHECK: call @qkv_gemm_block_bf16_f32_6x16_k32(
// CHECK: return
func.func @rounding_read_next(%x: memref<8x8xbf16> {qkv.name = "x"}, %w0: memref<8x8xbf16> {qkv.name = "w0", qkv.param},
                              %r: memref<8x8xbf16>, %c2: memref<8x8xf32>) attributes {llvm.emit_c_interface} {
  %zero = arith.constant 0.0 : f32
  %c1 = memref.alloc() : memref<8x8xf32>
  linalg.fill ins(%zero : f32) outs(%c1 : memref<8x8xf32>)
  linalg.matmul ins(%x, %w0 : memref<8x8xbf16>, memref<8x8xbf16>) outs(%c1 : memref<8x8xf32>)
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%c1 : memref<8x8xf32>) outs(%r : memref<8x8xbf16>) {
  ^bb0(%in: f32, %o: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  }
  %rv = memref.cast %r : memref<8x8xbf16> to memref<?x8xbf16>
  linalg.matmul ins(%x, %rv : memref<8x8xbf16>, memref<?x8xbf16>) outs(%c2 : memref<8x8xf32>)
  return
}

// An epilogue of the last member that reads a sibling's result when their widths may
// differ (N dynamic: each member then gets its own share of panels, and a task's block
// of the sibling need not be the one it wrote) is not taken: it runs after the group.
// CHECK-LABEL: func.func @reads_a_sibling_of_unknown_width(
// CHECK: scf.parallel
// CHECK-COUNT-2: call @qkv_gemm_block_f32_6x16_k32(
// CHECK: scf.reduce
// CHECK: linalg.generic
// CHECK: return
func.func @reads_a_sibling_of_unknown_width(%x: memref<?x8xf32>, %w0: memref<8x?xf32>, %w1: memref<8x?xf32>,
                                            %c1: memref<?x?xf32>, %out: memref<?x?xf32>) {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c1i = arith.constant 1 : index
  %m = memref.dim %x, %c0 : memref<?x8xf32>
  %n = memref.dim %w1, %c1i : memref<8x?xf32>
  linalg.fill ins(%zero : f32) outs(%c1 : memref<?x?xf32>)
  linalg.matmul ins(%x, %w0 : memref<?x8xf32>, memref<8x?xf32>) outs(%c1 : memref<?x?xf32>)
  %c2 = memref.alloc(%m, %n) : memref<?x?xf32>
  linalg.fill ins(%zero : f32) outs(%c2 : memref<?x?xf32>)
  linalg.matmul ins(%x, %w1 : memref<?x8xf32>, memref<8x?xf32>) outs(%c2 : memref<?x?xf32>)
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%c2, %c1 : memref<?x?xf32>, memref<?x?xf32>) outs(%out : memref<?x?xf32>) {
  ^bb0(%u: f32, %g: f32, %o: f32):
    %r = arith.addf %u, %g : f32
    linalg.yield %r : f32
  }
  memref.dealloc %c2 : memref<?x?xf32>
  return
}
