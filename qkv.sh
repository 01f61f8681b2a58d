#!/usr/bin/env bash
# qkv.sh: the one entry point. Installs what is missing, configures, builds (with ninja's
# [n/N] progress) and runs. Safe to run again: each step is skipped when already done.
#
#   ./qkv.sh demo     install, build, run the seed walkthrough example end to end
#   ./qkv.sh demo three-matmuls
#                     the same for the second walkthrough, "attention is three matmuls"
#   ./qkv.sh test     install, build, fetch the test model (and lizard) if missing, run the
#                     ctest suite
#   ./qkv.sh test --sanitize
#                     the same in build-sanitize/ with ASan + UBSan and the libFuzzer
#                     targets' short runs (docs/reliability.md)
#   ./qkv.sh test --gcc
#                     the same in build-gcc/ built by g++ with -Wall -Wextra -Werror: qkv's
#                     own code stays warning-free under GCC too (docs/reliability.md)
#   ./qkv.sh build    install and build everything
#   ./qkv.sh bench    build and run the benchmarks under bench/
#   ./qkv.sh clean    remove the build directory
#
# Environment: QKV_BUILD_DIR (default build; build-sanitize with --sanitize, build-gcc
# with --gcc), QKV_JOBS
# (default: all cores),
# QKV_MODEL_CACHE (where scripts/fetch-model.sh keeps models; default ~/.cache/qkv/models),
# QKV_TOOL_CACHE (where scripts/fetch-lizard.sh keeps lizard; default ~/.cache/qkv/tools).
set -euo pipefail
cd "$(dirname "$0")"

BUILD=${QKV_BUILD_DIR:-build}
SANITIZE=0
GCC=0
JOBS=${QKV_JOBS:-$(nproc)}
LLVM=/usr/lib/llvm-22

say() { echo "[qkv] $*"; }
elapsed() { echo $(( $(date +%s) - $1 ))s; }

deps() {
  local t=$(date +%s)
  say "checking dependencies (scripts/install-deps.sh)"
  scripts/install-deps.sh
  say "dependencies ready in $(elapsed "$t")"
}

configure() {
  if [ "$SANITIZE" = 1 ] && [ ! -f "$BUILD/build.ninja" ]; then
    # -O1 and line tables: readable sanitizer stacks at a fraction of -O3's compile time.
    say "configuring $BUILD (CMake + Ninja, clang 22, ASan + UBSan, fuzzers)"
    cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -DNDEBUG" \
      "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -DNDEBUG" \
      -DQKV_SANITIZE=ON -DQKV_BUILD_FUZZERS=ON \
      -DCMAKE_C_COMPILER="$LLVM/bin/clang" -DCMAKE_CXX_COMPILER="$LLVM/bin/clang++"
  elif [ "$GCC" = 1 ] && [ ! -f "$BUILD/build.ninja" ]; then
    # Every warning in qkv's own code is an error; MLIR's and LLVM's headers are SYSTEM
    # includes (qkv_mlir_deps), so theirs are not reported.
    say "configuring $BUILD (CMake + Ninja, g++, Release, -Wall -Wextra -Werror)"
    cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      "-DCMAKE_CXX_FLAGS=-Wall -Wextra -Werror" \
      -DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++
  elif [ ! -f "$BUILD/build.ninja" ]; then
    say "configuring $BUILD (CMake + Ninja, clang 22, Release)"
    cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_C_COMPILER="$LLVM/bin/clang" -DCMAKE_CXX_COMPILER="$LLVM/bin/clang++"
  fi
}

build() {
  local t=$(date +%s)
  configure
  say "building ${*:-everything} with $JOBS jobs"
  ninja -C "$BUILD" -j "$JOBS" "$@"
  say "built in $(elapsed "$t")"
}

cmd=${1:-help}
shift || true
case "$cmd" in
  demo)
    case "${1:-seed}" in
      seed) demo=qkv-seed-walkthrough ;;
      three-matmuls) demo=qkv-seed-three-matmuls ;;
      *) echo "qkv.sh demo: unknown demo '$1' (the demos: seed, the default; three-matmuls)" >&2
         exit 2 ;;
    esac
    deps
    build "$demo"
    say "running the demo ($demo)"
    "$BUILD/bin/$demo"
    ;;
  test)
    case "${1:-}" in
      --sanitize) shift; SANITIZE=1; BUILD=${QKV_BUILD_DIR:-build-sanitize} ;;
      --gcc) shift; GCC=1; BUILD=${QKV_BUILD_DIR:-build-gcc} ;;
    esac
    deps
    build
    # The model tests (tests/models, examples/embed.cpp) need all-MiniLM-L6-v2: downloaded
    # once into the model cache ($QKV_MODEL_CACHE, default ~/.cache/qkv/models).
    scripts/fetch-model.sh minilm
    # code_function_length counts lines with lizard: pinned wheels, downloaded once.
    scripts/fetch-lizard.sh
    t=$(date +%s)
    say "running the test suite (ctest)"
    ctest --test-dir "$BUILD" --output-on-failure -j "$JOBS" "$@"
    say "tests passed in $(elapsed "$t")"
    ;;
  build)
    deps
    build "$@"
    ;;
  bench)
    deps
    build
    for b in "$BUILD"/bin/bench_*; do
      [ -x "$b" ] || continue
      say "running $b"
      "$b" "$@"
    done
    ;;
  clean)
    rm -rf "$BUILD"
    ;;
  *)
    sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
    [ "$cmd" = help ] || exit 2
    ;;
esac
