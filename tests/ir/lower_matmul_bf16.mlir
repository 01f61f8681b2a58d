// qkv-lower-matmul-to-microkernels on each ISA tier (docs/compiler.md, "ISA tiers"):
// linalg.matmul of bf16 operands into f32. On avx512bf16 the products are bf16 pairs on
// x86vector.avx512.dot (vdpbf16ps): B packed with rows 2k and 2k + 1 interleaved column by
// column (vector.interleave, a zero row past an odd K), A's pair broadcast as one 32-bit
// element, and an odd K's last column, in the skinny form that reads A in place, a masked
// pair after the loop. On f32 the same matmul widens its operands (arith.extf) as it packs
// them and runs f32 FMAs. Under medium precision f32 operands are rounded to bf16
// (arith.truncf) for the pairs.
// RUN: qkv-opt %s --pass-pipeline="builtin.module(qkv-lower-matmul-to-microkernels{vector-bits=512 kc=32 mc=12 isa=avx512bf16},canonicalize,cse)" | FileCheck %s --check-prefix=DOT
// RUN: qkv-opt %s --pass-pipeline="builtin.module(qkv-lower-matmul-to-microkernels{vector-bits=512 kc=32 mc=12 isa=f32},canonicalize,cse)" | FileCheck %s --check-prefix=F32
// RUN: qkv-opt %s --pass-pipeline="builtin.module(qkv-lower-matmul-to-microkernels{vector-bits=512 kc=32 mc=12 isa=avx512bf16 precision=medium},canonicalize,cse)" | FileCheck %s --check-prefix=MEDIUM
// RUN: qkv-opt %s --pass-pipeline="builtin.module(qkv-lower-matmul-to-microkernels{vector-bits=512 kc=32 mc=12 isa=amx},canonicalize,cse)" | FileCheck %s --check-prefix=AMX
// RUN: not qkv-opt %s --pass-pipeline="builtin.module(qkv-lower-matmul-to-microkernels{isa=sse})" 2>&1 | FileCheck %s --check-prefix=BAD

// A bf16 weight: the runtime packs it, in pairs of rows on avx512bf16, widened on f32.
// DOT-LABEL: func.func @weights
// DOT-SAME: memref<?xbf16> {qkv.packed_param = 1 : i64, qkv.panel_columns = 64 : i64, qkv.panel_rows = 2 : i64, qkv.row_multiple = 2 : i64}
// DOT: func.call @qkv_gemm_skinny_bf16_dot_6x64(
// DOT: func.call @qkv_gemm_block_bf16_dot_6x64_k32(
// F32-LABEL: func.func @weights
// F32-SAME: memref<?xf32> {qkv.packed_param = 1 : i64, qkv.panel_columns = 64 : i64, qkv.panel_rows = 1 : i64, qkv.row_multiple = 1 : i64}
// F32: func.call @qkv_gemm_block_bf16_f32_6x64_k32(
func.func @weights(%a: memref<?x7xbf16> {qkv.name = "x"}, %b: memref<7x70xbf16> {qkv.name = "w", qkv.param}, %c: memref<?x70xf32>) attributes {llvm.emit_c_interface} {
  linalg.matmul ins(%a, %b : memref<?x7xbf16>, memref<7x70xbf16>) outs(%c : memref<?x70xf32>)
  return
}

// A bf16 B that is not a param: packed on every call, 2 panels x 4 pairs of rows x 64
// columns x 2.
// DOT-LABEL: func.func @activations
// DOT: memref.alloc() {alignment = 64 : i64} : memref<1024xbf16>
// DOT: func.call @qkv_gemm_pack_b_bf16_dot_64(
// F32-LABEL: func.func @activations
// F32: memref.alloc() {alignment = 64 : i64} : memref<896xf32>
// F32: func.call @qkv_gemm_pack_b_bf16_f32_64(
func.func @activations(%a: memref<?x7xbf16>, %b: memref<7x70xbf16>, %c: memref<?x70xf32>) {
  linalg.matmul ins(%a, %b : memref<?x7xbf16>, memref<7x70xbf16>) outs(%c : memref<?x70xf32>)
  return
}

// f32 operands: f32 FMAs unless the precision is medium.
// DOT-LABEL: func.func @f32
// DOT: func.call @qkv_gemm_block_f32_6x64_k32(
// MEDIUM-LABEL: func.func @f32
// MEDIUM: memref.alloc() {alignment = 64 : i64} : memref<1024xbf16>
// MEDIUM: func.call @qkv_gemm_pack_b_f32_dot_64(
// MEDIUM: func.call @qkv_gemm_block_f32_dot_6x64_k32(
func.func @f32(%a: memref<?x7xf32>, %b: memref<7x70xf32>, %c: memref<?x70xf32>) {
  linalg.matmul ins(%a, %b : memref<?x7xf32>, memref<7x70xf32>) outs(%c : memref<?x70xf32>)
  return
}

// A bf16 graph's product rounded to bf16 (the truncation generic after it): C stays f32,
// and each task rounds its block of C into the output right after computing it.
// DOT-LABEL: func.func @rounded
// DOT: %[[C:.*]] = memref.alloc(%{{.*}}) : memref<?x70xf32>
// DOT-NOT: linalg.generic
// DOT: scf.parallel
// DOT: func.call @qkv_gemm_block_bf16_dot_6x64_k32(
// DOT: %[[V:.*]] = vector.load %[[C]][%{{.*}}] : memref<?x70xf32>, vector<16xf32>
// DOT: %[[R:.*]] = arith.truncf %[[V]] : vector<16xf32> to vector<16xbf16>
// DOT: vector.store %[[R]], %arg2[%{{.*}}] : memref<?x70xbf16>, vector<16xbf16>
// DOT: memref.dealloc %[[C]]
func.func @rounded(%a: memref<?x7xbf16>, %b: memref<7x70xbf16>, %out: memref<?x70xbf16>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = memref.dim %a, %c0 : memref<?x7xbf16>
  %c = memref.alloc(%m) : memref<?x70xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<?x70xf32>)
  linalg.matmul ins(%a, %b : memref<?x7xbf16>, memref<7x70xbf16>) outs(%c : memref<?x70xf32>)
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<?x70xf32>) outs(%out : memref<?x70xbf16>) {
  ^bb0(%x: f32, %y: bf16):
    %t = arith.truncf %x : f32 to bf16
    linalg.yield %t : bf16
  }
  memref.dealloc %c : memref<?x70xf32>
  return
}

// A bf16 bias broadcast (widened) into C: the tiles start from the bias, read as bf16 and
// widened in the GEMM functions (which take it as a bf16 memref: `_bias_bf16`); the
// rounding after it is each task's epilogue. Nothing else is left of the generics.
// DOT-LABEL: func.func @bf16_bias
// DOT-NOT: linalg.generic
// DOT: func.call @qkv_gemm_block_bf16_dot_6x64_k32_bias_bf16({{.*}}, %{{.*}}) : ({{.*}}, memref<?xbf16, strided<[1], offset: ?>>) -> ()
// DOT: arith.truncf %{{.*}} : vector<16xf32> to vector<16xbf16>
// On AMX, with one block of K, the GEMM rounds each tile itself as it writes it, from its
// f32 scratch tile (`_c_bf16`): the rounding alone was the epilogue, so the block
// function writes the output, and no f32 C is made.
// AMX-LABEL: func.func @bf16_bias
// AMX-NOT: linalg.generic
// AMX-NOT: memref<?x70xf32>
// AMX: func.call @qkv_gemm_block_bf16_amx_32x64_k32_bias_bf16_c_bf16(%{{.*}}, %{{.*}}, %{{.*}}, {{.*}}) : (memref<?x?xbf16, strided<[?, 1], offset: ?>>, memref<?xbf16, strided<[1], offset: ?>>, memref<?x?xbf16, strided<[?, 1], offset: ?>>, {{.*}}, memref<?xbf16, strided<[1], offset: ?>>) -> ()
// AMX-NOT: arith.truncf
// AMX: return
// F32-LABEL: func.func @bf16_bias
// F32-NOT: linalg.generic
// F32: func.call @qkv_gemm_block_bf16_f32_6x64_k32_bias_bf16({{.*}}, %{{.*}}) : ({{.*}}, memref<?xbf16, strided<[1], offset: ?>>) -> ()
// F32: arith.truncf %{{.*}} : vector<16xf32> to vector<16xbf16>
func.func @bf16_bias(%a: memref<?x7xbf16>, %b: memref<7x70xbf16>, %bias: memref<70xbf16>,
                     %out: memref<?x70xbf16>) {
  %c0 = arith.constant 0 : index
  %m = memref.dim %a, %c0 : memref<?x7xbf16>
  %c = memref.alloc(%m) : memref<?x70xf32>
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%bias : memref<70xbf16>) outs(%c : memref<?x70xf32>) {
  ^bb0(%x: bf16, %y: f32):
    %w = arith.extf %x : bf16 to f32
    linalg.yield %w : f32
  }
  linalg.matmul ins(%a, %b : memref<?x7xbf16>, memref<7x70xbf16>) outs(%c : memref<?x70xf32>)
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<?x70xf32>) outs(%out : memref<?x70xbf16>) {
  ^bb0(%x: f32, %y: bf16):
    %t = arith.truncf %x : f32 to bf16
    linalg.yield %t : bf16
  }
  memref.dealloc %c : memref<?x70xf32>
  return
}

// An activation after the rounding (GELU's polynomial here cut to a product): on AMX the
// GEMM writes the rounded product into a bf16 buffer instead of the f32 C, and each
// task's epilogue reads it as bf16 (no truncf left in it).
// AMX-LABEL: func.func @bf16_then_scaled
// AMX: %[[C16:.*]] = memref.alloc(%{{.*}}) : memref<?x70xbf16>
// AMX-NOT: memref<?x70xf32>
// AMX: func.call @qkv_gemm_block_bf16_amx_32x64_k32_c_bf16(
// AMX: vector.load %[[C16]][%{{.*}}] : memref<?x70xbf16>, vector<16xbf16>
// AMX: arith.extf
// AMX: arith.mulf
// AMX: memref.dealloc %[[C16]]
// K longer than kc (40 > 32): more than one K block adds into an f32 C, which stays.
// AMX-LABEL: func.func @bf16_long_k
// AMX: memref.alloc(%{{.*}}) : memref<?x70xf32>
// AMX: func.call @qkv_gemm_block_bf16_amx_32x64_k32(
// AMX: arith.truncf
func.func @bf16_then_scaled(%a: memref<?x7xbf16>, %b: memref<7x70xbf16>, %out: memref<?x70xbf16>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %two = arith.constant 2.0 : f32
  %m = memref.dim %a, %c0 : memref<?x7xbf16>
  %c = memref.alloc(%m) : memref<?x70xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<?x70xf32>)
  linalg.matmul ins(%a, %b : memref<?x7xbf16>, memref<7x70xbf16>) outs(%c : memref<?x70xf32>)
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<?x70xf32>) outs(%out : memref<?x70xbf16>) {
  ^bb0(%x: f32, %y: bf16):
    %t = arith.truncf %x : f32 to bf16
    %w = arith.extf %t : bf16 to f32
    %s = arith.mulf %w, %two : f32
    %r = arith.truncf %s : f32 to bf16
    linalg.yield %r : bf16
  }
  memref.dealloc %c : memref<?x70xf32>
  return
}

func.func @bf16_long_k(%a: memref<?x40xbf16>, %b: memref<40x70xbf16>, %out: memref<?x70xbf16>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %m = memref.dim %a, %c0 : memref<?x40xbf16>
  %c = memref.alloc(%m) : memref<?x70xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<?x70xf32>)
  linalg.matmul ins(%a, %b : memref<?x40xbf16>, memref<40x70xbf16>) outs(%c : memref<?x70xf32>)
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%c : memref<?x70xf32>) outs(%out : memref<?x70xbf16>) {
  ^bb0(%x: f32, %y: bf16):
    %t = arith.truncf %x : f32 to bf16
    linalg.yield %t : bf16
  }
  memref.dealloc %c : memref<?x70xf32>
  return
}

// On AMX, the block function of a bf16 C: every tile from zero through the scratch tile,
// the start added, rounded and stored under masks; C is never loaded nor a tile store's
// target; the lines a row tile writes are prefetched for writing first, two a row (64
// bf16 columns).
// AMX-LABEL: func.func private @qkv_gemm_block_bf16_amx_32x64_k32_bias_bf16_c_bf16(
// AMX-NOT: amx.tile_store %arg2
// AMX-NOT: vector.load %arg2
// AMX-COUNT-2: memref.prefetch %arg2[%{{.*}}, %{{.*}}], write, locality<3>, data : memref<?x?xbf16
// AMX-NOT: memref.prefetch
// AMX: amx.tile_zero
// AMX: amx.tile_mulf
// AMX: amx.tile_store
// AMX: arith.truncf %{{.*}} : vector<16xf32> to vector<16xbf16>
// AMX: vector.maskedstore %arg2
// AMX: return

// The block function: A's rows packed as bf16 (a zero past an odd block of K), pairs
// broadcast as 32-bit elements, four dot products per broadcast.
// DOT-LABEL: func.func private @qkv_gemm_block_bf16_dot_6x64_k32
// DOT: memref.alloc() {alignment = 64 : i64} : memref<384xbf16>
// DOT: %[[ODD:.*]] = arith.cmpi ne, %{{.*}}, %c0
// DOT: vector.maskedload %arg0{{.*}} vector<32xbf16>
// DOT: scf.if %[[ODD]]
// DOT: memref.store %{{.*}}, %{{.*}} : memref<384xbf16>
// DOT: scf.for
// DOT: %[[PAIR:.*]] = vector.load %{{.*}} : memref<384xbf16>, vector<2xbf16>
// DOT: %[[WORD:.*]] = vector.bitcast %[[PAIR]] : vector<2xbf16> to vector<1xi32>
// DOT: %[[ONE:.*]] = vector.extract %[[WORD]][0] : i32 from vector<1xi32>
// DOT: %[[WORDS:.*]] = vector.broadcast %[[ONE]] : i32 to vector<16xi32>
// DOT: %[[AV:.*]] = vector.bitcast %[[WORDS]] : vector<16xi32> to vector<32xbf16>
// DOT-NEXT: x86vector.avx512.dot %{{.*}}, %[[AV]], %{{.*}} : vector<32xbf16> -> vector<16xf32>
// DOT-NEXT: x86vector.avx512.dot %{{.*}}, %[[AV]], %{{.*}} : vector<32xbf16> -> vector<16xf32>
// DOT-NEXT: x86vector.avx512.dot %{{.*}}, %[[AV]], %{{.*}} : vector<32xbf16> -> vector<16xf32>
// DOT-NEXT: x86vector.avx512.dot %{{.*}}, %[[AV]], %{{.*}} : vector<32xbf16> -> vector<16xf32>

// The skinny form: an odd K's last pair after the loop, its second element masked off.
// DOT-LABEL: func.func private @qkv_gemm_skinny_bf16_dot_6x64
// DOT: %[[REM:.*]] = arith.remui %arg8, %c2
// DOT: %[[ODDK:.*]] = arith.cmpi ne, %[[REM]], %c0
// DOT: %[[TAILMASK:.*]] = vector.constant_mask [1] : vector<2xi1>
// DOT: scf.if %[[ODDK]] -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// DOT: vector.maskedload %arg0[%{{.*}}], %[[TAILMASK]], %{{.*}} : memref<?x?xbf16, strided<[?, 1], offset: ?>>, vector<2xi1>, vector<2xbf16>

// B in pairs: rows 2k and 2k + 1 (masked off past K) interleaved, 32 bf16 per 16 columns.
// DOT-LABEL: func.func private @qkv_gemm_pack_b_bf16_dot_64
// DOT: %[[SECOND:.*]] = arith.cmpi slt, %{{.*}}, %arg5 : index
// DOT: %[[COLS:.*]] = vector.create_mask %{{.*}} : vector<16xi1>
// DOT: %[[S:.*]] = vector.broadcast %[[SECOND]] : i1 to vector<16xi1>
// DOT: %[[M1:.*]] = arith.andi %[[COLS]], %[[S]] : vector<16xi1>
// DOT: %[[R0:.*]] = vector.maskedload %arg0[%{{.*}}], %[[COLS]]
// DOT: %[[R1:.*]] = vector.maskedload %arg0[%{{.*}}], %[[M1]]
// DOT: %[[BOTH:.*]] = vector.interleave %[[R0]], %[[R1]] : vector<16xbf16> -> vector<32xbf16>
// DOT: vector.store %[[BOTH]], %arg1

// The f32 tier: bf16 widened as packed, f32 FMAs.
// F32-LABEL: func.func private @qkv_gemm_block_bf16_f32_6x64_k32
// F32: arith.extf %{{.*}} : vector<16xbf16> to vector<16xf32>
// F32: vector.fma
// F32-NOT: x86vector
// F32-LABEL: func.func private @qkv_gemm_pack_b_bf16_f32_64
// F32: arith.extf %{{.*}} : vector<16xbf16> to vector<16xf32>

// Medium: f32 operands rounded to bf16 as they are packed.
// MEDIUM-LABEL: func.func private @qkv_gemm_pack_b_f32_dot_64
// MEDIUM: arith.truncf %{{.*}} : vector<16xf32> to vector<16xbf16>
// MEDIUM: vector.interleave
// MEDIUM-LABEL: func.func private @qkv_gemm_block_f32_dot_6x64_k32
// MEDIUM: arith.truncf %{{.*}} : vector<32xf32> to vector<32xbf16>
// MEDIUM: x86vector.avx512.dot

// BAD: unknown isa 'sse' (f32, avx512bf16, amx)

// The bias_bf16 block function reads the bias row as bf16 and widens it.
// F32-LABEL: func.func private @qkv_gemm_block_bf16_f32_6x64_k32_bias_bf16(
// F32: %[[B:.*]] = vector.maskedload %arg11[%{{.*}}], %{{.*}}, %{{.*}} : memref<?xbf16, strided<[1], offset: ?>>, vector<16xi1>, vector<16xbf16> into vector<16xbf16>
// F32-NEXT: arith.extf %[[B]] : vector<16xbf16> to vector<16xf32>
