// qkv-warp-mma-to-nvgpu: a kernel's runs of warp tile ops (transfer_read, vector.contract,
// transfer_write) become mma.sync through MLIR's vector-to-nvgpu conversion; the scalar
// index arithmetic around them (which that conversion, run on a whole function in MLIR
// 22, fails on) is left alone. A bf16 kernel's workgroup buffers hold f16 bits (stores
// and loads bitcast) and the function is marked qkv.bf16_mma; after convert-nvgpu-to-nvvm,
// qkv-restore-bf16-mma makes its mma.sync ops bf16 (i32 fragments) and drops the mark.
// Every workgroup buffer gets a 16-byte alignment (ldmatrix reads 16-byte rows).
// RUN: qkv-opt %s --split-input-file --pass-pipeline="builtin.module(gpu.module(gpu.func(qkv-warp-mma-to-nvgpu)))" | FileCheck %s
// RUN: qkv-opt %s --split-input-file --pass-pipeline="builtin.module(gpu.module(gpu.func(qkv-warp-mma-to-nvgpu),convert-nvgpu-to-nvvm,gpu.func(qkv-restore-bf16-mma)))" | FileCheck %s --check-prefix=NVVM

// CHECK-LABEL: gpu.func @bf16_kernel
// CHECK-SAME: workgroup(%[[A:.*]] : memref<16x16xf16, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[B:.*]] : memref<8x16xf16, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[C:.*]] : memref<16x8xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64})
// CHECK-SAME: qkv.bf16_mma
// CHECK: %[[BITS:.*]] = arith.bitcast %{{.*}} : bf16 to f16
// CHECK: memref.store %[[BITS]], %[[A]]
// CHECK: %[[LOADED:.*]] = memref.load %[[B]]{{.*}} : memref<8x16xf16, #gpu.address_space<workgroup>>
// CHECK: arith.bitcast %[[LOADED]] : f16 to bf16
// CHECK: arith.addi
// CHECK-NOT: vector.contract
// CHECK: nvgpu.mma.sync
// CHECK-SAME: mmaShape = [16, 8, 16]
// CHECK-NOT: vector.contract
// NVVM-LABEL: gpu.func @bf16_kernel
// NVVM-NOT: qkv.bf16_mma
// NVVM: nvvm.mma.sync A[{{.*}}] B[{{.*}}] C[{{.*}}] {{{.*}}multiplicandAPtxType = #nvvm.mma_type<bf16>, multiplicandBPtxType = #nvvm.mma_type<bf16>, shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (i32, i32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
gpu.module @kernels {
  gpu.func @bf16_kernel(%x: bf16, %i: index, %out: memref<16x8xf32>) workgroup(%a: memref<16x16xbf16, #gpu.address_space<workgroup>>, %b: memref<8x16xbf16, #gpu.address_space<workgroup>>, %c: memref<16x8xf32, #gpu.address_space<workgroup>>) kernel {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %pad = arith.constant 0.0 : bf16
    %padf = arith.constant 0.0 : f32
    memref.store %x, %a[%i, %c0] : memref<16x16xbf16, #gpu.address_space<workgroup>>
    %y = memref.load %b[%i, %c0] : memref<8x16xbf16, #gpu.address_space<workgroup>>
    memref.store %y, %a[%c0, %i] : memref<16x16xbf16, #gpu.address_space<workgroup>>
    %r = arith.addi %i, %c1 : index
    %ta = vector.transfer_read %a[%c0, %c0], %pad {in_bounds = [true, true]} : memref<16x16xbf16, #gpu.address_space<workgroup>>, vector<16x16xbf16>
    %tb = vector.transfer_read %b[%c0, %c0], %pad {in_bounds = [true, true]} : memref<8x16xbf16, #gpu.address_space<workgroup>>, vector<8x16xbf16>
    %tc = vector.transfer_read %c[%c0, %c0], %padf {in_bounds = [true, true]} : memref<16x8xf32, #gpu.address_space<workgroup>>, vector<16x8xf32>
    %d = vector.contract {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>} %ta, %tb, %tc : vector<16x16xbf16>, vector<8x16xbf16> into vector<16x8xf32>
    vector.transfer_write %d, %c[%c0, %c0] {in_bounds = [true, true]} : vector<16x8xf32>, memref<16x8xf32, #gpu.address_space<workgroup>>
    %s = memref.load %c[%r, %c0] : memref<16x8xf32, #gpu.address_space<workgroup>>
    memref.store %s, %out[%c0, %c0] : memref<16x8xf32>
    gpu.return
  }
}

// -----

// An f16 kernel: f16 mma.sync, no mark, buffers keep their type.
// CHECK-LABEL: gpu.func @f16_kernel
// CHECK-NOT: qkv.bf16_mma
// CHECK: nvgpu.mma.sync
// NVVM-LABEL: gpu.func @f16_kernel
// NVVM: nvvm.mma.sync {{.*}} : (vector<2xf16>, vector<2xf16>, f32) -> !llvm.struct<(f32, f32, f32, f32)>
gpu.module @kernels {
  gpu.func @f16_kernel(%i: index) workgroup(%a: memref<16x16xf16, #gpu.address_space<workgroup>>, %b: memref<16x8xf16, #gpu.address_space<workgroup>>, %c: memref<16x8xf32, #gpu.address_space<workgroup>>) kernel {
    %c0 = arith.constant 0 : index
    %pad = arith.constant 0.0 : f16
    %padf = arith.constant 0.0 : f32
    %r = arith.muli %i, %i : index
    %ta = vector.transfer_read %a[%r, %c0], %pad {in_bounds = [true, true]} : memref<16x16xf16, #gpu.address_space<workgroup>>, vector<16x16xf16>
    %tb = vector.transfer_read %b[%c0, %c0], %pad {in_bounds = [true, true]} : memref<16x8xf16, #gpu.address_space<workgroup>>, vector<16x8xf16>
    %tc = vector.transfer_read %c[%r, %c0], %padf {in_bounds = [true, true]} : memref<16x8xf32, #gpu.address_space<workgroup>>, vector<16x8xf32>
    %d = vector.contract {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>} %ta, %tb, %tc : vector<16x16xf16>, vector<16x8xf16> into vector<16x8xf32>
    vector.transfer_write %d, %c[%r, %c0] {in_bounds = [true, true]} : vector<16x8xf32>, memref<16x8xf32, #gpu.address_space<workgroup>>
    gpu.return
  }
}
