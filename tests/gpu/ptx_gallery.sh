#!/bin/bash
# Every gallery graph's CUDA kernels: `qkv dump NAME --target=cuda --chip=C --stage=ptx`
# for sm_80 and sm_90, each kernel module assembled by ptxas for its chip. Needs no GPU;
# without ptxas (the CUDA toolkit) it says so and passes.
#   tests/gpu/ptx_gallery.sh QKV_BINARY [NAME...]
set -u
qkv=$1
shift
ptxas=$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)
if [ ! -x "$ptxas" ]; then
  echo "ptx_gallery: SKIPPED: no ptxas (the CUDA toolkit) on PATH or in /usr/local/cuda/bin"
  exit 0
fi
names=("$@")
[ ${#names[@]} -eq 0 ] && names=($("$qkv" list | awk '{print $1}'))
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
failed=0 modules=0
for name in "${names[@]}"; do
  for chip in sm_80 sm_90; do
    if ! "$qkv" dump "$name" --target=cuda --chip=$chip --stage=ptx >"$dir/all.ptx" 2>"$dir/err"; then
      echo "FAIL $name $chip: qkv dump failed:"; head -c 2000 "$dir/err"; echo
      failed=$((failed + 1)); continue
    fi
    rm -f "$dir"/m*.ptx
    # one file per kernel module (each starts with a "// ===== kernel module" line)
    awk -v d="$dir" '/^\/\/ ===== kernel module/{f = d "/m" (++i) ".ptx"} f {print > f}' "$dir/all.ptx"
    n=$(ls "$dir"/m*.ptx 2>/dev/null | wc -l)
    if [ "$n" -eq 0 ]; then
      echo "FAIL $name $chip: no kernel module in the PTX"; failed=$((failed + 1)); continue
    fi
    for m in "$dir"/m*.ptx; do
      if ! "$ptxas" -arch=$chip "$m" -o /dev/null 2>"$dir/ptxas.err"; then
        echo "FAIL $name $chip: ptxas rejects $(head -1 "$m"):"; head -c 2000 "$dir/ptxas.err"; echo
        failed=$((failed + 1))
      fi
    done
    modules=$((modules + n))
  done
done
echo "ptx_gallery: ${#names[@]} graphs x 2 chips, $modules kernel modules, $failed failures"
[ $failed -eq 0 ]
