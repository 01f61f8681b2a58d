#!/bin/bash
# scripts/gpu-check-bundle.sh OUT [CASES_TOOL]: the GPU check bundle (docs/gpu.md), made
# here without a GPU: one folder of at most 48 MiB that a machine with an NVIDIA GPU and no
# LLVM runs with one command, OUT/run.sh.
#   OUT/cases/     every gallery graph (f32; the built-in graphs in bf16 too) and the
#                  attention benchmark's graphs as CUDA bundles, with what the runner needs
#                  to draw their inputs (CASES_TOOL: build/bin/qkv-gpu-check-cases)
#   OUT/src/       qkv's DSL and runtime sources, nlohmann-json, the runner
#                  (tests/gpu/check/runner.cpp) and its CMakeLists.txt
#   OUT/run.sh, OUT/bench.py
# Fails when the folder exceeds 48 MiB.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: scripts/gpu-check-bundle.sh OUT [CASES_TOOL]}
tool=${2:-$root/build/bin/qkv-gpu-check-cases}
limit=$((48 * 1024 * 1024))
start=$(date +%s)
[ -x "$tool" ] || { echo "gpu-check-bundle: no $tool (build it: cmake --build build)"; exit 1; }
rm -rf "$out"
mkdir -p "$out/src/dsl" "$out/src/runtime" "$out/src/third_party"
echo "[gpu-check-bundle] exporting the cases"
"$tool" "$out"
cp -r "$root/dsl/include" "$root/dsl/lib" "$out/src/dsl/"
cp -r "$root/runtime/include" "$root/runtime/lib" "$out/src/runtime/"
json=/usr/include/nlohmann
[ -d "$json" ] || { echo "gpu-check-bundle: no nlohmann-json headers in $json"; exit 1; }
cp -r "$json" "$out/src/third_party/"
cp "$root/tests/gpu/check/runner.cpp" "$out/src/"
cp "$root/tests/gpu/check/CMakeLists.standalone.txt" "$out/src/CMakeLists.txt"
sed -n 's/^project(qkv VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt" >"$out/src/VERSION"
[ -s "$out/src/VERSION" ] || { echo "gpu-check-bundle: no version in CMakeLists.txt"; exit 1; }
echo "qkv $(cat "$out/src/VERSION") commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')" \
  >"$out/src/COMMIT"
cp "$root/tests/gpu/check/run.sh" "$root/tests/gpu/check/bench.py" "$out/"
bytes=$(du -sb "$out" | cut -f1)
cases=$(find "$out/cases" -name case.json | wc -l)
echo "[gpu-check-bundle] $out: $cases cases, $((bytes / 1024)) KiB of at most $((limit / 1024)) KiB, made in $(( $(date +%s) - start )) s"
if [ "$bytes" -gt "$limit" ]; then
  echo "gpu-check-bundle: FAILED: the folder is over 48 MiB"
  exit 1
fi
