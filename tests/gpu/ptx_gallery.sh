#!/bin/bash
# Every gallery graph's CUDA kernels: `qkv dump NAME --target=cuda --chip=C --stage=ptx`
# for sm_80 and sm_90, each kernel module assembled by ptxas for its chip. Needs no GPU;
# without ptxas (the CUDA toolkit) it says so and passes. With --dtype T (f16 or bf16,
# repeatable), the graphs are built with that element type instead (`qkv dump --dtype`;
# the built-in graphs only: the variants have f32 in their types), and the script also
# checks that each chip's attention kernels use the tensor cores: PTX with an
# `mma.sync.aligned.m16n8k16` of that type for every graph with "attn" in its name.
#   tests/gpu/ptx_gallery.sh QKV_BINARY [--dtype T]... [NAME...]
set -u
qkv=$1
shift
dtypes=()
while [ $# -gt 0 ] && [ "$1" = --dtype ]; do
  dtypes+=("$2")
  shift 2
done
[ ${#dtypes[@]} -eq 0 ] && dtypes=(f32)
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
for dtype in "${dtypes[@]}"; do
for name in "${names[@]}"; do
  for chip in sm_80 sm_90; do
    what="$name $chip $dtype"
    if ! "$qkv" dump "$name" --dtype "$dtype" --target=cuda --chip=$chip --stage=ptx >"$dir/all.ptx" 2>"$dir/err"; then
      echo "FAIL $what: qkv dump failed:"; head -c 2000 "$dir/err"; echo
      failed=$((failed + 1)); continue
    fi
    if [ "$dtype" != f32 ] && [[ "$name" == *attn* ]] &&
       ! grep -q "mma.sync.aligned.m16n8k16.row.col.f32.$dtype.$dtype.f32" "$dir/all.ptx"; then
      echo "FAIL $what: no $dtype tensor-core mma.sync in the attention kernel"
      failed=$((failed + 1))
    fi
    rm -f "$dir"/m*.ptx
    # one file per kernel module (each starts with a "// ===== kernel module" line)
    awk -v d="$dir" '/^\/\/ ===== kernel module/{f = d "/m" (++i) ".ptx"} f {print > f}' "$dir/all.ptx"
    n=$(ls "$dir"/m*.ptx 2>/dev/null | wc -l)
    if [ "$n" -eq 0 ]; then
      echo "FAIL $what: no kernel module in the PTX"; failed=$((failed + 1)); continue
    fi
    for m in "$dir"/m*.ptx; do
      if ! "$ptxas" -arch=$chip "$m" -o /dev/null 2>"$dir/ptxas.err"; then
        echo "FAIL $what: ptxas rejects $(head -1 "$m"):"; head -c 2000 "$dir/ptxas.err"; echo
        failed=$((failed + 1))
      fi
    done
    modules=$((modules + n))
  done
done
done
echo "ptx_gallery: ${#names[@]} graphs x 2 chips x ${#dtypes[@]} dtypes (${dtypes[*]}), $modules kernel modules, $failed failures"
[ $failed -eq 0 ]
