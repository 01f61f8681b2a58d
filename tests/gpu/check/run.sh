#!/bin/bash
# The GPU check bundle's one command (docs/gpu.md), for a machine with an NVIDIA GPU, a
# C++20 compiler and CMake, and no LLVM: builds the runner from src/ (qkv's runtime alone),
# runs every case under cases/ on device 0 against the reference interpreter, times the
# attention forward and a decode step (bench cases) on the device, then, where PyTorch is
# installed, times its SDPA at the same shapes (bench.py). Writes gpu-summary.txt,
# check.txt and results.json to $OUT (else this folder) and prints the summary.
# Exit: 0 when every case matches; 1 when one does not or the build fails; 77 when there
# is no CUDA device (nothing is run).
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here}
build=${QKV_CHECK_BUILD:-${TMPDIR:-/tmp}/qkv-gpu-check-build}
summary=$out/gpu-summary.txt
start=$(date +%s)
mkdir -p "$out"
{
  echo "qkv GPU check bundle, run $(date -u +%Y-%m-%dT%H:%M:%SZ), made from $(cat "$here/src/COMMIT")"
  if command -v nvidia-smi >/dev/null; then
    echo "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)"
  else
    echo "GPU: no nvidia-smi"
  fi
} >"$summary"

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
echo "[run.sh] building the runner in $build"
if ! { cmake -S "$here/src" -B "$build" "${generator[@]}" \
         -DCMAKE_BUILD_TYPE="${QKV_CHECK_BUILD_TYPE:-Release}" &&
       cmake --build "$build" -j "$(nproc)"; } >"$build.log" 2>&1; then
  echo "FAILED: building the runner (cmake, C++20 compiler); the log's end:" | tee -a "$summary"
  tail -30 "$build.log" | tee -a "$summary"
  exit 1
fi
echo "[run.sh] runner built in $(( $(date +%s) - start )) s"

"$build/qkv-gpu-check" "$here/cases" --json "$out/results.json" | tee "$out/check.txt"
rc=${PIPESTATUS[0]}
if [ "$rc" -eq 77 ]; then
  grep "no CUDA device" "$out/check.txt" >>"$summary"
  echo "no CUDA device: nothing was run" | tee -a "$summary"
  exit 77
fi
tail -1 "$out/check.txt" >>"$summary"
grep "^FAIL" "$out/check.txt" >>"$summary"
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  python3 "$here/bench.py" "$out/results.json" >>"$summary" 2>&1 ||
    echo "bench.py failed (see above)" >>"$summary"
else
  echo "no PyTorch with CUDA here: no SDPA baseline" >>"$summary"
  python3 "$here/bench.py" --no-torch "$out/results.json" >>"$summary" 2>&1
fi
echo "total $(( $(date +%s) - start )) s" >>"$summary"
echo "===== gpu-summary.txt ====="
cat "$summary"
exit "$rc"
