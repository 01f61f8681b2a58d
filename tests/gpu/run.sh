#!/bin/bash
# The GPU checks (docs/gpu.md), one script for a machine with an NVIDIA GPU; under 5
# minutes there. Builds what it needs in build-gpu/ (clang 22, Release; LLVM/MLIR 22 and the
# build tools must be installed: scripts/install-deps.sh), then:
#   1. the checks that need no GPU: every gallery graph's PTX for sm_80 and sm_90 through
#      ptxas (cuda_ptx_gallery), the built-in graphs' in bf16 and f16 too, with tensor-core
#      mma.sync in their attention kernels (cuda_ptx_gallery_half), and the tiled kernels
#      run on the CPU against the interpreter (compiler_gallery_gpu_tiles_test);
#   2. with a GPU: every gallery graph (f32; the built-in ones in bf16 too, and the f16/bf16
#      cases of compiler_ops_test) compiled for it and run against the interpreter
#      (compiler_gallery_test --gtest_filter=All/CudaDevice.*), and the attention forward
#      benchmark (bench_cuda: bf16 on the tensor cores and f32, B*H = 32, Dh = 128,
#      L = 4096 and 8192).
# Writes the summary to $OUT/gpu-summary.txt ($OUT, else the repository root) and prints it.
# Where no GPU is at hand it says so and stops after step 1.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${QKV_GPU_BUILD:-$root/build-gpu}
summary=${OUT:-$root}/gpu-summary.txt
llvm=/usr/lib/llvm-22
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
start=$(date +%s)

note "qkv GPU checks, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')"
if command -v nvidia-smi >/dev/null; then
  note "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)"
else
  note "GPU: none found (no nvidia-smi)"
fi
if [ ! -x "$llvm/bin/clang++" ] || [ ! -d "$llvm/lib/cmake/mlir" ]; then
  note "FAILED: LLVM/MLIR 22 is not installed ($llvm): run scripts/install-deps.sh first"
  exit 1
fi

jobs=$(nproc)
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DQKV_BUILD_BENCH=ON \
    -DCMAKE_C_COMPILER="$llvm/bin/clang" -DCMAKE_CXX_COMPILER="$llvm/bin/clang++" >/dev/null ||
    { note "FAILED: cmake configure"; exit 1; }
fi
ninja -C "$build" -j "$jobs" qkv-cli compiler_gallery_test bench_cuda >"$build/gpu-build.log" 2>&1 ||
  { note "FAILED: build (see $build/gpu-build.log)"; tail -20 "$build/gpu-build.log"; exit 1; }
note "built in $(($(date +%s) - start)) s"

status=0
run_step() { # name, command...
  local name=$1 t=$(date +%s)
  shift
  if "$@" >"$build/$name.log" 2>&1; then
    note "PASS  $name ($(($(date +%s) - t)) s): $(grep -E 'PASSED|SKIPPED|ptx_gallery:' "$build/$name.log" | tail -2 | tr '\n' ' ')"
  else
    note "FAIL  $name ($(($(date +%s) - t)) s); the end of $build/$name.log:"
    tail -25 "$build/$name.log" | tee -a "$summary"
    status=1
  fi
}
run_step ptx_gallery "$root/tests/gpu/ptx_gallery.sh" "$build/bin/qkv"
run_step ptx_gallery_half "$root/tests/gpu/ptx_gallery.sh" "$build/bin/qkv" --dtype bf16 --dtype f16 \
  seed mha causal gqa cross attn attn_causal attn_window attn_decode decode
run_step gpu_tiles_on_cpu "$build/bin/compiler_gallery_test" --gtest_brief=1 --gtest_filter='All/GpuTiles.*:TensorCoreTiles.*'

why=$("$build/bin/bench_cuda" 0 2>&1 | head -1)
if echo "$why" | grep -q "no GPU here"; then
  note "No GPU: $why"
  note "Stopped after the checks that need none."
  exit $status
fi
run_step gpu_vs_interpreter "$build/bin/compiler_gallery_test" --gtest_brief=1 --gtest_filter='All/CudaDevice.*:TensorCoreDevice.*'
if "$build/bin/bench_cuda" 5 >"$build/bench_cuda.log" 2>&1; then
  note "PASS  bench_cuda:"
else
  note "FAIL  bench_cuda:"
  status=1
fi
cat "$build/bench_cuda.log" | tee -a "$summary"
note "total $(($(date +%s) - start)) s"
exit $status
