// qkv-warp-mma-to-nvgpu refuses what it cannot convert as bits: a kernel mixing bf16 and
// f16 contractions, and a bf16 tile read by something other than a contraction.
// RUN: qkv-opt %s --split-input-file --verify-diagnostics --pass-pipeline="builtin.module(gpu.module(gpu.func(qkv-warp-mma-to-nvgpu)))"

gpu.module @kernels {
  // expected-error @+1 {{a kernel with both bf16 and other contractions}}
  gpu.func @mixed(%a: vector<16x16xbf16>, %b: vector<8x16xbf16>, %c: vector<16x8xf32>, %e: vector<16x16xf16>, %f: vector<8x16xf16>) kernel {
    %d = vector.contract {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>} %a, %b, %c : vector<16x16xbf16>, vector<8x16xbf16> into vector<16x8xf32>
    %g = vector.contract {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>} %e, %f, %d : vector<16x16xf16>, vector<8x16xf16> into vector<16x8xf32>
    gpu.return
  }
}

// -----

gpu.module @kernels {
  gpu.func @other_reader(%b: vector<8x16xbf16>, %c: vector<16x8xf32>, %out: memref<16x16xbf16>) workgroup(%a: memref<16x16xbf16, #gpu.address_space<workgroup>>) kernel {
    %c0 = arith.constant 0 : index
    %pad = arith.constant 0.0 : bf16
    // expected-error @+1 {{a bf16 tile read by something other than a contraction}}
    %ta = vector.transfer_read %a[%c0, %c0], %pad {in_bounds = [true, true]} : memref<16x16xbf16, #gpu.address_space<workgroup>>, vector<16x16xbf16>
    %d = vector.contract {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>} %ta, %b, %c : vector<16x16xbf16>, vector<8x16xbf16> into vector<16x8xf32>
    vector.transfer_write %ta, %out[%c0, %c0] {in_bounds = [true, true]} : vector<16x16xbf16>, memref<16x16xbf16>
    gpu.return
  }
}
