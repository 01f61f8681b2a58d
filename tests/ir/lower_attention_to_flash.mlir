// qkv-lower-attention-to-flash: the fused kernel. Query tiles are gathered transposed so
// vectors run along queries; scores and P.V are register-tiled vector micro-kernels; the mods are
// inlined and vectorized; exp2 is a polynomial; no L x S tensor exists.
// RUN: qkv-opt %s --pass-pipeline="builtin.module(qkv-lower-attention-to-flash{vector-bits=512 q-tile=64 kv-tile=64},canonicalize,cse)" | FileCheck %s
// The default tiles: 4 vectors of queries (64 f32) without a mask and 66 keys (64 rounded
// up to whole 6-row register tiles of the score kernel); 2 vectors (32) with a mask, and
// as many keys as queries.
// RUN: qkv-opt %s --pass-pipeline="builtin.module(qkv-lower-attention-to-flash{vector-bits=512},canonicalize,cse)" | FileCheck %s --check-prefix=DEFAULT

// The decode kernel asks OpenMP how many threads it may split the keys over.
// CHECK: func.func private @omp_get_max_threads() -> i32
// Each attention op counts the calls that ran each of its kernels (one for a static query
// length, decode and tiled for a dynamic one): a slot each of a public i64 global, named
// by a string global (the node, from the op's location, then the kernel), which the
// runtime reads (Kernel::schedule_runs).
// CHECK: memref.global "public" @qkv_schedule_runs : memref<9xi64> = dense<0>
// CHECK: llvm.mlir.global external constant @qkv_schedules("{{[^,]*}}:tiled(q=64),{{[^,]*}}:decode,{{[^,]*}}:tiled(q=64),

// GQA (2 query heads on 1 kv head), an ALiBi-like score_mod and a causal mask, static
// shapes: 33 queries (> decode-rows) take the tiled kernel only.
// CHECK-LABEL: func.func @tiled
// DEFAULT-LABEL: func.func @tiled
// DEFAULT: memref.alloca() {alignment = 64 : i64} : memref<32x32xf32>
// CHECK-SAME: %[[Q:[a-z0-9]+]]: tensor<2x33x4xf32>, %[[K:[a-z0-9]+]]: tensor<1x40x4xf32>, %[[V:[a-z0-9]+]]: tensor<1x40x3xf32>, %[[SL:[a-z0-9]+]]: tensor<2xf32>
// CHECK-NOT: qkv.attention
// CHECK-DAG: %[[LOG2E:.*]] = arith.constant dense<1.44269502> : vector<16xf32>
// CHECK-DAG: %[[NINF:.*]] = arith.constant dense<0xFF800000> : vector<16xf32>
// CHECK-DAG: %[[SCALE:.*]] = arith.constant dense<5.000000e-01> : vector<16xf32>
// CHECK: %[[QM:.*]] = bufferization.to_buffer %[[Q]] read_only
// CHECK: %[[OUT:.*]] = memref.alloc() : memref<2x33x3xf32>
// the first op's only kernel ran once more
// CHECK: %[[RUNS:.*]] = memref.get_global @qkv_schedule_runs : memref<9xi64>
// CHECK: memref.atomic_rmw addi %c1_i64, %[[RUNS]][%c0] : (i64, memref<9xi64>) -> i64
// one task per (head, query tile of 64)
// CHECK: scf.parallel (%[[H:.*]]) = (%c0) to (%c2) step (%c1)
// query head h reads kv head h / (Hq / Hkv)
// CHECK: %[[HK:.*]] = arith.divui %[[H]], %c2 : index
// transposed tiles: Dh (4) and Dv (3) rows of 64 queries
// CHECK: %[[QT:.*]] = memref.alloca() {alignment = 64 : i64} : memref<4x64xf32>
// CHECK: %[[ST:.*]] = memref.alloca() {alignment = 64 : i64} : memref<64x64xf32>
// CHECK: %[[OT:.*]] = memref.alloca() {alignment = 64 : i64} : memref<3x64xf32>
// CHECK: %[[M:.*]] = memref.alloca() {alignment = 64 : i64} : memref<64xf32>
// CHECK: %[[L:.*]] = memref.alloca() {alignment = 64 : i64} : memref<64xf32>
// CHECK: %[[CORR:.*]] = memref.alloca() {alignment = 64 : i64} : memref<64xf32>
// queries scaled by 1/sqrt(4) (log2 e joins only without a score mod): each row d of qT
// is column d of q gathered 16 rows at a time (lane i reads i rows down: i times q's row
// stride), in a loop over d; rows past the 33 queries are off in the mask (read as 0)
// CHECK: %{{.*}}, %{{.*}}, %{{.*}}:3, %[[QSTRIDES:.*]]:3 = memref.extract_strided_metadata %[[QM]]
// CHECK: %[[LANE:.*]] = vector.step : vector<16xindex>
// CHECK: %[[QRS:.*]] = vector.broadcast %[[QSTRIDES]]#1 : index to vector<16xindex>
// CHECK: %[[QOFF:.*]] = arith.muli %[[LANE]], %[[QRS]] : vector<16xindex>
// CHECK: scf.for %[[IB:.*]] = %c0 to %c64 step %c16
// CHECK: %[[QROW:.*]] = arith.minsi %[[IB]], %c32 : index
// CHECK: %[[NQ:.*]] = arith.subi %c33, %[[IB]] : index
// CHECK: %[[QIN:.*]] = vector.create_mask %[[NQ]] : vector<16xi1>
// CHECK: scf.for %[[D:.*]] = %c0 to %c4 step %c1
// CHECK: %[[QX:.*]] = vector.gather %[[QM]][%[[H]], %[[QROW]], %[[D]]] [%[[QOFF]]], %[[QIN]], %{{.*}} : memref<2x33x4xf32, strided<[?, ?, 1], offset: ?>>
// CHECK: %[[QS:.*]] = arith.mulf %[[QX]], %[[SCALE]] : vector<16xf32>
// CHECK: vector.store %[[QS]], %[[QT]][%[[D]], %[[IB]]] : memref<4x64xf32>, vector<16xf32>
// the running max starts at -inf
// CHECK: vector.store %[[NINF]], %[[M]]
// scores: a 6 (keys) x 4 (vectors of queries) register tile over the head dim
// CHECK: scf.for %[[KD:.*]] = %c0 to %c4 step %c1 iter_args({{.*}}) -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>,
// CHECK: %[[QV:.*]] = vector.load %[[QT]][%[[KD]], %c0] : memref<4x64xf32>, vector<16xf32>
// CHECK: %[[KX:.*]] = tensor.extract %[[K]][%[[HK]], %[[J:.*]], %[[KD]]] : tensor<1x40x4xf32>
// CHECK: %[[KB:.*]] = vector.broadcast %[[KX]] : f32 to vector<16xf32>
// CHECK: vector.fma %[[KB]], %[[QV]], %{{.*}} : vector<16xf32>
// CHECK: vector.store %{{.*}}, %[[ST]][%[[J]], %c0] : memref<64x64xf32>, vector<16xf32>
// online softmax, 16 queries at a time: their positions as a vector
// CHECK: scf.for %[[C:.*]] = %c0 to %c64 step %c16
// CHECK: %[[MOLD:.*]] = vector.load %[[M]][%[[C]]]
// CHECK: %[[QI:.*]] = arith.addi %[[LANE]], %{{.*}} : vector<16xindex>
// CHECK: %[[QC:.*]] = arith.minsi %[[QI]], %{{.*}} : vector<16xindex>
// CHECK: %[[MX:.*]] = scf.for %[[JJ:.*]] = {{.*}} iter_args(%[[ACC:.*]] = %[[MOLD]]) -> (vector<16xf32>)
// CHECK: %[[S:.*]] = vector.load %[[ST]][%[[JJ]], %[[C]]]
// the score_mod, inlined: the capture is read once at the head, a scalar
// CHECK: %[[SLOPE:.*]] = tensor.extract %[[SL]][%[[H]]] : tensor<2xf32>
// CHECK: %[[SLOPEV:.*]] = vector.broadcast %[[SLOPE]] : f32 to vector<16xf32>
// CHECK: %[[SM:.*]] = arith.addf %[[S]], %[[SLOPEV]] : vector<16xf32>
// CHECK: %[[S2:.*]] = arith.mulf %[[SM]], %[[LOG2E]] : vector<16xf32>
// -inf scores count as masked; NaN ones are kept (unordered-or-not-equal) to reach the output
// CHECK: %[[FIN:.*]] = arith.cmpf une, %[[S2]], %[[NINF]] : vector<16xf32>
// the mask, vectorized over the 16 queries
// CHECK: %[[KVV:.*]] = vector.broadcast %[[JJ]] : index to vector<16xindex>
// CHECK: %[[CAUSAL:.*]] = arith.cmpi sge, %[[QC]], %[[KVV]] : vector<16xindex>
// CHECK: %[[KEEP:.*]] = arith.andi %[[FIN]], %[[CAUSAL]] : vector<16xi1>
// CHECK: %[[SK:.*]] = arith.select %[[KEEP]], %[[S2]], %[[NINF]]
// CHECK: vector.store %[[SK]], %[[ST]][%[[JJ]], %[[C]]]
// CHECK: %[[GT:.*]] = arith.cmpf ogt, %[[SK]], %[[ACC]]
// CHECK: arith.select %[[GT]], %[[SK]], %[[ACC]]
// a row with nothing kept subtracts 0, not -inf
// CHECK: %[[NONE:.*]] = arith.cmpf oeq, %[[MX]], %[[NINF]]
// CHECK: %[[MUSE:.*]] = arith.select %[[NONE]], %{{.*}}, %[[MX]]
// the rescale factor exp2(m_old - m_new), by the polynomial
// CHECK: %[[DM:.*]] = arith.subf %[[MOLD]], %[[MUSE]] : vector<16xf32>
// CHECK: math.roundeven
// CHECK-COUNT-7: math.fma
// CHECK: arith.shli
// CHECK: %[[P2:.*]] = arith.bitcast %{{.*}} : vector<16xi32> to vector<16xf32>
// CHECK: %[[CORRV:.*]] = arith.mulf %{{.*}}, %[[P2]] : vector<16xf32>
// CHECK: vector.store %[[MX]], %[[M]][%[[C]]]
// CHECK: vector.store %[[CORRV]], %[[CORR]][%[[C]]]
// probabilities exp2(s - m) replace the scores; their sum rescales l
// CHECK: %[[S3:.*]] = vector.load %[[ST]]
// CHECK: arith.subf %[[S3]], %[[MUSE]]
// CHECK: %[[LOLD:.*]] = vector.load %[[L]][%[[C]]]
// CHECK: %[[LNEW:.*]] = math.fma %[[LOLD]], %[[CORRV]], %{{.*}} : vector<16xf32>
// CHECK: vector.store %[[LNEW]], %[[L]][%[[C]]]
// P.V: the output tile (3 rows of Dv x 64 queries) rescaled by corr, then accumulated
// CHECK: %[[CORR0:.*]] = vector.load %[[CORR]][%c0]
// CHECK: %[[O0:.*]] = vector.load %[[OT]][%c0, %c0]
// CHECK: %[[OS:.*]] = arith.mulf %[[O0]], %[[CORR0]]
// CHECK: scf.for %[[PJ:.*]] = %c0 to %{{.*}} step %c1 iter_args(%{{.*}} = %[[OS]],
// CHECK: %[[PV:.*]] = vector.load %[[ST]][%[[PJ]], %c0]
// CHECK: %[[VX:.*]] = tensor.extract %[[V]][%[[HK]], %[[PJ]], %c0] : tensor<1x40x3xf32>
// CHECK: %[[VB:.*]] = vector.broadcast %[[VX]]
// CHECK: vector.fma %[[VB]], %[[PV]]
// one division at the end; a row that kept nothing writes 0; each row d of Oᵀ is
// scattered into column d of the output, 16 rows at a time (lane i: i rows of 3 down),
// rows past the 33 queries masked off
// CHECK: %[[OOFF:.*]] = arith.muli %[[LANE]], %{{.*}} : vector<16xindex>
// CHECK: %[[LF:.*]] = vector.load %[[L]]
// CHECK: %[[ANY:.*]] = arith.cmpf ugt, %[[LF]], %{{.*}}
// CHECK: %[[INV:.*]] = arith.divf %{{.*}}, %[[LF]]
// CHECK: %[[INVS:.*]] = arith.select %[[ANY]], %[[INV]], %{{.*}}
// CHECK: %[[OROW:.*]] = arith.minsi %[[OB:.*]], %c32 : index
// CHECK: %[[NO:.*]] = arith.subi %c33, %[[OB]] : index
// CHECK: %[[OIN:.*]] = vector.create_mask %[[NO]] : vector<16xi1>
// CHECK: scf.for %[[OD:.*]] = %c0 to %c3 step %c1
// CHECK: %[[OV:.*]] = vector.load %[[OT]][%[[OD]], %[[OB]]] : memref<3x64xf32>, vector<16xf32>
// CHECK: %[[OS2:.*]] = arith.mulf %[[OV]], %[[INVS]]
// CHECK: vector.scatter %[[OUT]][%[[H]], %[[OROW]], %[[OD]]] [%[[OOFF]]], %[[OIN]], %[[OS2]] : memref<2x33x3xf32>
// CHECK: bufferization.to_tensor %[[OUT]] restrict writable
func.func @tiled(%q: tensor<2x33x4xf32>, %k: tensor<1x40x4xf32>, %v: tensor<1x40x3xf32>, %slopes: tensor<2xf32>) -> tensor<2x33x3xf32> {
  %a = qkv.attention %q, %k, %v captures(%slopes : tensor<2xf32>) : tensor<2x33x4xf32>, tensor<1x40x4xf32>, tensor<1x40x3xf32> -> tensor<2x33x3xf32>
    score {
    ^bb0(%x: f32, %b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index, %sl: tensor<2xf32>):
      %e = tensor.extract %sl[%h] : tensor<2xf32>
      %y = arith.addf %x, %e : f32
      qkv.yield %y : f32
    } mask {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index, %sl: tensor<2xf32>):
      %c = arith.cmpi sge, %qi, %ki : index
      qkv.yield %c : i1
    }
  return %a : tensor<2x33x3xf32>
}

// A dynamic query length: both kernels, chosen on each call. At most decode-rows (by
// default one vector: 16 f32 at 512 bits, with a mask) queries take the decode kernel, more the tiled
// one, which classifies every key tile by the mask's intervals; each counts its runs.
// CHECK-LABEL: func.func @dynamic_causal
// CHECK: %[[LQ:.*]] = tensor.dim %arg0, %c2 : tensor<1x16x?x64xf32>
// CHECK: %[[FEW:.*]] = arith.cmpi ule, %[[LQ]], %c16 : index
// The decode kernel is outlined into a function of its own (deferred: a JIT compile takes
// it out of the module and compiles it when a call first reaches it; its body is checked
// at the end of the file), called with the values it uses; the tiled kernel, which long
// lengths take, stays in place.
// CHECK: scf.if %[[FEW]] {
// CHECK: memref.atomic_rmw addi %c1_i64, %{{.*}}[%c1] : (i64, memref<9xi64>) -> i64
// CHECK-NEXT: func.call @qkv_deferred_schedule_1(%{{.*}}, %[[LQ]], {{.*}}) : (index, index, index, f32, memref<1x16x?x64xf32, strided<[?, ?, ?, 1], offset: ?>>, memref<1x16x?x64xf32, strided<[?, ?, ?, 1], offset: ?>>, memref<1x16x?x64xf32, strided<[?, ?, ?, 1], offset: ?>>, memref<1x16x?x64xf32>) -> ()
// CHECK-NEXT: } else {
// CHECK-NEXT: memref.get_global @qkv_schedule_runs
// CHECK-NEXT: memref.atomic_rmw addi %c1_i64, %{{.*}}[%c2] : (i64, memref<9xi64>) -> i64
// tiled: groups of 8 key tiles (512 keys) are tested first, empty when q_hi < j0
// CHECK: scf.parallel (%{{.*}}, %[[QTI:.*]]) = (%c0, %c0) to (%c16, %{{.*}})
// CHECK: %[[I0:.*]] = arith.muli %[[QTI]], %c64 : index
// CHECK: %[[NG:.*]] = arith.divui %{{.*}}, %c8 : index
// CHECK: scf.for %[[KG:.*]] = %c0 to %[[NG]] step %c1 {
// CHECK: %[[FROM:.*]] = arith.muli %[[KG]], %c8 : index
// CHECK: %[[G0:.*]] = arith.muli %[[KG]], %c512 : index
// CHECK: %[[GQHI:.*]] = arith.subi %{{.*}}, %c1 : index
// CHECK: %[[GANY:.*]] = arith.cmpi sge, %[[GQHI]], %[[G0]] : index
// CHECK: scf.if %[[GANY]] {
// then each tile kt of the group covers keys [j0, j0 + cols): empty when q_hi < j0,
// full when q_lo >= kv_hi
// CHECK: scf.for %[[KT:.*]] = %[[FROM]] to %{{.*}} step %c1 {
// CHECK: %[[J0:.*]] = arith.muli %[[KT]], %c64 : index
// CHECK: %[[COLS:.*]] = arith.minsi %{{.*}}, %c64 : index
// CHECK: %[[KVEND:.*]] = arith.addi %[[J0]], %[[COLS]] : index
// CHECK: %[[KVHI:.*]] = arith.subi %[[KVEND]], %c1 : index
// CHECK: %[[FULL:.*]] = arith.cmpi sge, %[[I0]], %[[KVHI]] : index
// CHECK: %[[NOTEMPTY:.*]] = arith.cmpi sge, %[[GQHI]], %[[J0]] : index
// CHECK: scf.if %[[NOTEMPTY]] {
// CHECK: vector.fma
// CHECK: scf.if %[[FULL]] {
// a full tile has no mask code: the first compare is the -inf check
// CHECK-NOT: vector<16xindex>
// CHECK: } else {
// CHECK: arith.cmpi sge, %{{.*}}, %{{.*}} : vector<16xindex>
func.func @dynamic_causal(%q: tensor<1x16x?x64xf32>, %k: tensor<1x16x?x64xf32>, %v: tensor<1x16x?x64xf32>) -> tensor<1x16x?x64xf32> {
  %a = qkv.attention %q, %k, %v : tensor<1x16x?x64xf32>, tensor<1x16x?x64xf32>, tensor<1x16x?x64xf32> -> tensor<1x16x?x64xf32>
    mask {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index):
      %c = arith.cmpi sge, %qi, %ki : index
      qkv.yield %c : i1
    }
  return %a : tensor<1x16x?x64xf32>
}

// One query (a static length of at most decode-rows): the split-KV decode kernel.
// CHECK-LABEL: func.func @decode_causal
// decode: splits from the thread count, tasks over (kv head, split), partial results
// CHECK: call @omp_get_max_threads() : () -> i32
// CHECK: %[[PART:.*]] = memref.alloc(%{{.*}}) : memref<?x66xf32>
// CHECK: scf.parallel (%{{.*}}, %[[SP:.*]]) = (%c0, %c0) to (%c16, %{{.*}})
// the query row in registers: its 4 vectors loaded once per key tile, before the blocks
// CHECK-COUNT-4: vector.load %{{.*}} : memref<1x16x1x64xf32, {{.*}}>, vector<16xf32>
// CHECK: scf.for
// dot products over the head dim, 16 keys in a block: each key's row read front to back
// (4 loads, 4 FMAs with the query's vectors, no query load in the block), the sums of two
// keys halved and added as soon as both exist, then pairs of pairs, until one vector of
// 16 scores (4 rounds of shuffles), stored as a run of scores; then the keys left over
// one at a time, reduced across lanes
// CHECK-NOT: memref<1x16x1x64xf32
// CHECK-COUNT-8: vector.fma
// CHECK-NEXT: vector.shuffle %{{.*}}, %{{.*}} [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23] : vector<16xf32>, vector<16xf32>
// CHECK-NEXT: vector.shuffle %{{.*}}, %{{.*}} [8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31] : vector<16xf32>, vector<16xf32>
// CHECK-COUNT-8: vector.fma
// CHECK: vector.shuffle %{{.*}}, %{{.*}} [0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23] : vector<16xf32>, vector<16xf32>
// CHECK: vector.shuffle %{{.*}}, %{{.*}} [0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27] : vector<16xf32>, vector<16xf32>
// CHECK: vector.shuffle %{{.*}}, %{{.*}} [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30] : vector<16xf32>, vector<16xf32>
// CHECK: vector.shuffle %{{.*}}, %{{.*}} [1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31] : vector<16xf32>, vector<16xf32>
// CHECK: vector.store %{{.*}}, %{{.*}}[%c0, %{{.*}}] : memref<4x64xf32>, vector<16xf32>
// CHECK: vector.fma
// CHECK: vector.reduction <add>, %{{.*}} fastmath<reassoc> : vector<16xf32> into f32
// the mask over 16 keys at once in a partial tile (q = 0 here: kv <= 0)
// CHECK: arith.cmpi {{.*}} : vector<16xindex>
// merge of the splits by log-sum-exp, one task per (head, query)
// CHECK: scf.parallel
func.func @decode_causal(%q: tensor<1x16x1x64xf32>, %k: tensor<1x16x?x64xf32>, %v: tensor<1x16x?x64xf32>) -> tensor<1x16x1x64xf32> {
  %a = qkv.attention %q, %k, %v : tensor<1x16x1x64xf32>, tensor<1x16x?x64xf32>, tensor<1x16x?x64xf32> -> tensor<1x16x1x64xf32>
    mask {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index):
      %c = arith.cmpi sge, %qi, %ki : index
      qkv.yield %c : i1
    }
  return %a : tensor<1x16x1x64xf32>
}

// Heads split from a (B, L, H*Dh) tensor and merged back: the kernel reads q, k and v in
// the unsplit tensor at (b, i, h*Dh + d) and writes (b, i, h*Dv + d) of the merged
// result, so neither reshape makes a copy (both ops are gone).
// CHECK-LABEL: func.func @heads_in_place
// DEFAULT-LABEL: func.func @heads_in_place
// By default a dynamic query length without a mask gets four kernels with 16 lanes:
// decode for up to 8 queries, tiles of one vector (16 queries, 256 keys), of two vectors
// (32 queries, 256 keys), the default tiles (64 queries, 66 keys) beyond; the first three
// outlined (deferred; their tiles are checked at the end of the file).
// DEFAULT: arith.cmpi ule, %{{.*}}, %c8 : index
// DEFAULT: call @qkv_deferred_schedule_4(
// DEFAULT: arith.cmpi ule, %{{.*}}, %c16 : index
// DEFAULT: call @qkv_deferred_schedule_5(
// DEFAULT: arith.cmpi ule, %{{.*}}, %c32 : index
// DEFAULT: call @qkv_deferred_schedule_6(
// DEFAULT: memref.alloca() {alignment = 64 : i64} : memref<66x64xf32>
// CHECK-SAME: (%[[X:.*]]: tensor<1x?x32xf32>)
// CHECK-NOT: qkv.split_heads
// CHECK: %[[L:.*]] = tensor.dim %[[X]], %c1 : tensor<1x?x32xf32>
// CHECK: %[[XM:.*]] = bufferization.to_buffer %[[X]] read_only : tensor<1x?x32xf32> to memref<1x?x32xf32, strided<[?, ?, 1], offset: ?>>
// CHECK: %[[OUT:.*]] = memref.alloc(%[[L]]) : memref<1x?x32xf32>
// the query tile's columns are gathered at (0, i, h*16 + d), lanes a row of 32 apart
// CHECK: %{{.*}}, %{{.*}}, %{{.*}}:3, %[[XSTRIDES:.*]]:3 = memref.extract_strided_metadata %[[XM]]
// CHECK: %[[HOFF:.*]] = arith.muli %{{.*}}, %c16 : index
// CHECK: %[[COL:.*]] = arith.addi %[[HOFF]], %{{.*}} : index
// CHECK: vector.gather %[[XM]][%c0, %{{.*}}, %[[COL]]]
// P.V over Dv = 16 in whole register tiles of 4 rows x 4 vectors: 16 is no multiple of
// the 6 rows scores use, and a shorter last tile would be more code to compile
// CHECK: scf.for %{{.*}} = %c0 to %c16 step %c4 {
// CHECK: %{{.*}}:16 = scf.for
// the merged output, scattered at (0, i, h*16 + d)
// CHECK: vector.scatter %[[OUT]][%c0, %{{.*}}, %{{.*}}] [%{{.*}}], %{{.*}}, %{{.*}} : memref<1x?x32xf32>
// CHECK-NOT: qkv.merge_heads
// CHECK: %[[RES:.*]] = bufferization.to_tensor %[[OUT]] restrict writable : memref<1x?x32xf32> to tensor<1x?x32xf32>
// CHECK: return %[[RES]]
func.func @heads_in_place(%x: tensor<1x?x32xf32>) -> tensor<1x?x32xf32> {
  %q = qkv.split_heads %x heads 2 : tensor<1x?x32xf32> -> tensor<1x2x?x16xf32>
  %a = qkv.attention %q, %q, %q : tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32>, tensor<1x2x?x16xf32> -> tensor<1x2x?x16xf32>
  %m = qkv.merge_heads %a : tensor<1x2x?x16xf32> -> tensor<1x?x32xf32>
  return %m : tensor<1x?x32xf32>
}

// Keys and values from a paged KV cache: no (B, Hkv, S, Dh) tensor is built. Keys are read
// in three segments: the stored rows [0, lengths[b]) through the block table (page
// table[b, j / 8], row j % 8), this step's row [lengths[b], lengths[b] + 1), then the zero
// rows, whose tiles the mask (kv <= lengths[b] + q) hides, so they are skipped.
// DEFAULT-LABEL: func.func @decode_paged
// DEFAULT-SAME: (%{{.*}}: tensor<2x4x1x16xf32>, %[[POOL:.*]]: tensor<?x2x8x16xf32>, %[[TAB:.*]]: tensor<2x4xi32>, %[[LEN:.*]]: tensor<2xi64>, %[[NEWK:.*]]: tensor<2x2x1x16xf32>, %{{.*}}: tensor<2x2x1x16xf32>)
// DEFAULT-NOT: qkv.paged_cache_view
// DEFAULT-DAG: %[[PM:.*]] = bufferization.to_buffer %[[POOL]] read_only
// DEFAULT-DAG: %[[KM:.*]] = bufferization.to_buffer %[[NEWK]] read_only
// DEFAULT-NOT: memref.alloc() : memref<2x2x33x16xf32>
// DEFAULT: scf.parallel (%[[B:.*]], %[[H:.*]], %{{.*}}) =
// DEFAULT: %[[L64:.*]] = tensor.extract %[[LEN]][%[[B]]] : tensor<2xi64>
// DEFAULT: %[[L:.*]] = arith.index_cast %[[L64]] : i64 to index
// DEFAULT: %[[L1:.*]] = arith.addi %[[L]], %c1 : index
// stored rows, through the table
// DEFAULT: %[[E1:.*]] = arith.minsi %{{.*}}, %[[L]] : index
// DEFAULT: scf.for %[[J0:.*]] = %{{.*}} to %[[E1]] step %c32
// DEFAULT: %[[J:.*]] = arith.addi %[[J0]], %arg{{[0-9]+}} : index
// each key's step first prefetches the next tile's row (32 keys on, at most the segment's
// last), its group's share of the row's lines, through the table too
// DEFAULT: %[[NJ:.*]] = arith.addi %[[J]], %c32 : index
// DEFAULT: %[[NEXT:.*]] = arith.minsi %[[NJ]], %{{.*}} : index
// DEFAULT: scf.for
// DEFAULT: %[[NSLOT:.*]] = arith.divui %[[NEXT]], %c8 : index
// DEFAULT: tensor.extract %[[TAB]][%[[B]], %[[NSLOT]]] : tensor<2x4xi32>
// DEFAULT: memref.prefetch %[[PM]][
// DEFAULT: %[[SLOT:.*]] = arith.divui %[[J]], %c8 : index
// DEFAULT: %[[ID:.*]] = tensor.extract %[[TAB]][%[[B]], %[[SLOT]]] : tensor<2x4xi32>
// DEFAULT: %[[PG:.*]] = arith.index_cast %[[ID]] : i32 to index
// DEFAULT: %[[ROW:.*]] = arith.remui %[[J]], %c8 : index
// DEFAULT: vector.load %[[PM]][%[[PG]], %[[H]], %[[ROW]], %c0]
// this step's row
// DEFAULT: %[[S2:.*]] = arith.maxsi %{{.*}}, %[[L]] : index
// DEFAULT: %[[E2:.*]] = arith.minsi %{{.*}}, %[[L1]] : index
// DEFAULT: scf.for %[[F0:.*]] = %[[S2]] to %[[E2]] step %c32
// DEFAULT: %[[FJ:.*]] = arith.addi %[[F0]], %arg{{[0-9]+}} : index
// DEFAULT: %[[FR:.*]] = arith.subi %[[FJ]], %[[L]] : index
// DEFAULT: vector.load %[[KM]][%[[B]], %[[H]], %[[FR]], %c0]
// the zero rows: a tile runs only if some key in it is visible (lengths[b] >= its first key)
// DEFAULT: %[[S3:.*]] = arith.maxsi %{{.*}}, %[[L1]] : index
// DEFAULT: scf.for %[[Z0:.*]] = %[[S3]] to %{{.*}} step %c32
// DEFAULT: %[[ANY:.*]] = arith.cmpi sge, %[[L]], %[[Z0]] : index
// DEFAULT-NEXT: scf.if %[[ANY]]
// DEFAULT: vector.fma %{{.*}}, %cst{{.*}}, %cst
func.func @decode_paged(%q: tensor<2x4x1x16xf32>, %pool: tensor<?x2x8x16xf32>, %table: tensor<2x4xi32>, %len: tensor<2xi64>, %k: tensor<2x2x1x16xf32>, %v: tensor<2x2x1x16xf32>) -> tensor<2x4x1x16xf32> {
  %kc = qkv.paged_cache_view %pool[%table, %len], %k : (tensor<?x2x8x16xf32>, tensor<2x4xi32>, tensor<2xi64>, tensor<2x2x1x16xf32>) -> tensor<2x2x33x16xf32>
  %vc = qkv.paged_cache_view %pool[%table, %len], %v : (tensor<?x2x8x16xf32>, tensor<2x4xi32>, tensor<2xi64>, tensor<2x2x1x16xf32>) -> tensor<2x2x33x16xf32>
  %a = qkv.attention %q, %kc, %vc captures(%len : tensor<2xi64>) : tensor<2x4x1x16xf32>, tensor<2x2x33x16xf32>, tensor<2x2x33x16xf32> -> tensor<2x4x1x16xf32>
    mask {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index, %l: tensor<2xi64>):
      %e = tensor.extract %l[%b] : tensor<2xi64>
      %ei = arith.index_cast %e : i64 to index
      %lim = arith.addi %ei, %qi : index
      %c = arith.cmpi sle, %ki, %lim : index
      qkv.yield %c : i1
    }
  return %a : tensor<2x4x1x16xf32>
}

// A mask that never reads the query position (padding: kv < lengths[b]) has no diagonal,
// so it schedules as no mask: a dynamic length gets the same four kernels, with the
// no-mask tiles (64 queries by 66 keys) last, where a mask that reads the query takes
// tiles of 32 x 32.
// DEFAULT-LABEL: func.func @padding_schedules_as_no_mask
// DEFAULT: arith.cmpi ule, %{{.*}}, %c8 : index
// DEFAULT: call @qkv_deferred_schedule_9(
// DEFAULT: arith.cmpi ule, %{{.*}}, %c16 : index
// DEFAULT: call @qkv_deferred_schedule_10(
// DEFAULT: arith.cmpi ule, %{{.*}}, %c32 : index
// DEFAULT: call @qkv_deferred_schedule_11(
// DEFAULT: memref.alloca() {alignment = 64 : i64} : memref<66x64xf32>
// DEFAULT-NOT: memref<32x32xf32>
// DEFAULT: return
func.func @padding_schedules_as_no_mask(%q: tensor<2x2x?x16xf32>, %k: tensor<2x2x?x16xf32>, %v: tensor<2x2x?x16xf32>, %len: tensor<2xi64>) -> tensor<2x2x?x16xf32> {
  %a = qkv.attention %q, %k, %v captures(%len : tensor<2xi64>) : tensor<2x2x?x16xf32>, tensor<2x2x?x16xf32>, tensor<2x2x?x16xf32> -> tensor<2x2x?x16xf32>
    mask {
    ^bb0(%b: index, %h: index, %qi: index, %ki: index, %lq: index, %lk: index, %l: tensor<2xi64>):
      %e = tensor.extract %l[%b] : tensor<2xi64>
      %ei = arith.index_cast %e : i64 to index
      %c = arith.cmpi slt, %ki, %ei : index
      qkv.yield %c : i1
    }
  return %a : tensor<2x2x?x16xf32>
}

// The deferred schedules' functions, after every other: private, each the kernel its call
// stood for (here the decode kernel of @dynamic_causal: the keys split over OpenMP's
// threads, then merged).
// CHECK-LABEL: func.func private @qkv_deferred_schedule_7(
// CHECK-LABEL: func.func private @qkv_deferred_schedule_4(
// CHECK-LABEL: func.func private @qkv_deferred_schedule_1(
// CHECK-SAME: %{{.*}}: index, %{{.*}}: index, %{{.*}}: index, %{{.*}}: f32, %{{.*}}: memref<1x16x?x64xf32, strided<[?, ?, ?, 1], offset: ?>>
// CHECK: call @omp_get_max_threads()
// CHECK: scf.parallel
// CHECK: scf.parallel
// CHECK: memref.dealloc
// CHECK: return
// The short tiles of @padding_schedules_as_no_mask (no 32 x 32 tiles of a mask) and of
// @heads_in_place, by default.
// DEFAULT-LABEL: func.func private @qkv_deferred_schedule_9(
// DEFAULT-LABEL: func.func private @qkv_deferred_schedule_10(
// DEFAULT-NOT: memref<32x32xf32>
// DEFAULT: memref.alloca() {alignment = 64 : i64} : memref<256x16xf32>
// DEFAULT-NOT: memref<32x32xf32>
// DEFAULT-LABEL: func.func private @qkv_deferred_schedule_11(
// DEFAULT-NOT: memref<32x32xf32>
// DEFAULT: memref.alloca() {alignment = 64 : i64} : memref<256x32xf32>
// DEFAULT-NOT: memref<32x32xf32>
// DEFAULT-LABEL: func.func private @qkv_deferred_schedule_4(
// DEFAULT-LABEL: func.func private @qkv_deferred_schedule_5(
// DEFAULT: memref.alloca() {alignment = 64 : i64} : memref<256x16xf32>
// DEFAULT-LABEL: func.func private @qkv_deferred_schedule_6(
// DEFAULT: memref.alloca() {alignment = 64 : i64} : memref<256x32xf32>
