#!/usr/bin/env bash
# mutation-test.sh: applies each mutant of scripts/mutants.txt, one at a time, to a copy of
# the tree, rebuilds what changed, runs the tests the mutant names and prints whether they
# caught it. Every mutant must be killed.
#
#   scripts/mutation-test.sh              every mutant
#   scripts/mutation-test.sh ID...        only these
#   scripts/mutation-test.sh --list       the ids
#   scripts/mutation-test.sh --check      only that every search text occurs exactly once
#                                         in the work tree (no copy, no build: ctest runs it)
#
# The copy (one source tree and one build directory, reused across mutants and across
# runs) lives in QKV_MUTATION_DIR (default: ${TMPDIR:-/tmp}/qkv-mutation); the first run
# builds it from scratch, later runs rebuild only what changed. QKV_JOBS sets the build
# and test parallelism (default: all cores), QKV_MUTANTS another mutant list.
#
# Before any mutant, the unmutated copy must pass every test the list names: otherwise a
# failure would count as a kill. A mutant whose search text is missing or not unique
# ("not applicable"), that does not build, or whose test regex matches no test is an
# ERROR. The exit code is 0 only when every mutant was killed.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
MUTANTS=${QKV_MUTANTS:-$ROOT/scripts/mutants.txt}
DIR=${QKV_MUTATION_DIR:-${TMPDIR:-/tmp}/qkv-mutation}
JOBS=${QKV_JOBS:-$(nproc)}
LLVM=/usr/lib/llvm-22
SRC=$DIR/src
BUILD=$DIR/build
LOGS=$DIR/logs

say() { echo "[mutation] $*" >&2; }

# ---- the mutant list -------------------------------------------------------------------------
# parse: prints one record per mutant, fields separated by \x1f: id, file, search, replace,
# tests (escapes still in place).
parse() {
  python3 - "$MUTANTS" <<'EOF'
import re, sys
path = sys.argv[1]
mutants, cur = [], None
for n, line in enumerate(open(path, encoding="utf-8"), 1):
    line = line.rstrip("\n")
    if not line.strip() or line.lstrip().startswith("#"):
        continue
    m = re.fullmatch(r"\[([A-Za-z0-9_.-]+)\]\s*", line)
    if m:
        cur = {"id": m.group(1), "line": n}
        mutants.append(cur)
        continue
    m = re.fullmatch(r"(file|search|replace|tests): ?(.*)", line)
    if not m or cur is None:
        sys.exit(f"{path}:{n}: expected [id] or 'file:', 'search:', 'replace:', 'tests:'")
    if m.group(1) in cur:
        sys.exit(f"{path}:{n}: '{m.group(1)}' given twice for [{cur['id']}]")
    cur[m.group(1)] = m.group(2)
seen = set()
for mu in mutants:
    for key in ("file", "search", "tests"):
        if not mu.get(key):
            sys.exit(f"{path}:{mu['line']}: [{mu['id']}] has no '{key}:'")
    mu.setdefault("replace", "")
    if mu["id"] in seen:
        sys.exit(f"{path}:{mu['line']}: mutant id '{mu['id']}' used twice")
    seen.add(mu["id"])
    print("\x1f".join(mu[k] for k in ("id", "file", "search", "replace", "tests")))
EOF
}

# apply FILE SEARCH REPLACE: replaces the one occurrence of SEARCH in FILE (in the copy).
# Exit 3: not found, 4: found more than once.
apply_mutant() {
  python3 - "$1" "$2" "$3" <<'EOF'
import sys
path, search, replace = sys.argv[1:4]
unescape = lambda s: s.replace("\\\\", "\0").replace("\\n", "\n").replace("\0", "\\")
search, replace = unescape(search), unescape(replace)
text = open(path, encoding="utf-8").read()
n = text.count(search)
if n != 1:
    sys.exit(3 if n == 0 else 4)
open(path, "w", encoding="utf-8").write(text.replace(search, replace, 1))
EOF
}

# sync: makes $SRC hold exactly the files git knows in the work tree (tracked, and
# untracked but not ignored), rewriting only the files whose content differs (a rewritten
# file gets a new mtime, so ninja rebuilds what depends on it).
sync_copy() {
  mkdir -p "$SRC"
  git ls-files -z --cached --others --exclude-standard | python3 -c '
import os, sys
src, dst = sys.argv[1], sys.argv[2]
names = [n for n in sys.stdin.buffer.read().decode().split("\0") if n]
keep = set()
for n in names:
    a = os.path.join(src, n)
    if not os.path.isfile(a):
        continue  # deleted in the work tree but not yet in the index
    keep.add(n)
    b = os.path.join(dst, n)
    data = open(a, "rb").read()
    if os.path.isfile(b) and open(b, "rb").read() == data:
        continue
    os.makedirs(os.path.dirname(b) or ".", exist_ok=True)
    open(b, "wb").write(data)
    os.chmod(b, os.stat(a).st_mode)
for root, dirs, files in os.walk(dst):
    for f in files:
        rel = os.path.relpath(os.path.join(root, f), dst)
        if rel not in keep:
            os.remove(os.path.join(root, f))
' "$ROOT" "$SRC"
}

build_copy() {
  if [ ! -f "$BUILD/build.ninja" ]; then
    cmake -S "$SRC" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DQKV_BUILD_BENCH=OFF \
      -DCMAKE_C_COMPILER="$LLVM/bin/clang" -DCMAKE_CXX_COMPILER="$LLVM/bin/clang++" >"$1" 2>&1
  fi
  ninja -C "$BUILD" -j "$JOBS" >>"$1" 2>&1
}

# failures LOG: one line naming the ctest tests that failed in LOG and, after a colon, the
# gtest cases and lit files that failed inside them (the first few).
failures() {
  python3 - "$1" <<'EOF'
import re, sys
log = open(sys.argv[1], encoding="utf-8", errors="replace").read()
tests = re.findall(r"^\s+\d+ - (\S+) \(", log.split("The following tests FAILED:")[-1], re.M)
cases = []
for name in re.findall(r"^\[  FAILED  \] (\S+?)(?:,| \(\d+ ms\))", log, re.M):
    parts = name.split("/")  # Instantiation/Suite.Test/param -> Suite/param
    short = parts[1].split(".")[0] + "/" + parts[2] if len(parts) == 3 else name
    if short not in cases:
        cases.append(short)
for f in re.findall(r"^\s+qkv-ir :: (\S+)$", log, re.M):
    if f not in cases:
        cases.append(f)
more = f" (+{len(cases) - 4} more)" if len(cases) > 4 else ""
print(" ".join(tests) + (": " + ", ".join(cases[:4]) + more if cases else ""))
EOF
}

# run_tests REGEX LOG: runs the matching tests; prints what failed (see failures).
# Exit 0: all passed, 1: some failed, 2: no test matched.
run_tests() {
  local rc=0
  # No stdin for the tests: mpirun (the MPI tests) reads it and would swallow the rest of
  # the mutant list this loop reads.
  ctest --test-dir "$BUILD" -R "$1" -j "$JOBS" --timeout 300 --output-on-failure >"$2" 2>&1 \
    </dev/null || rc=$?
  if grep -q "No tests were found" "$2"; then
    return 2
  fi
  [ "$rc" -eq 0 ] && return 0
  failures "$2"
  return 1
}

# ---- main ------------------------------------------------------------------------------------
records=$(parse)
if [ "${1:-}" = "--list" ]; then
  cut -d $'\x1f' -f1 <<<"$records"
  exit 0
fi
if [ "${1:-}" = "--check" ]; then
  python3 -c '
import os, sys
root = sys.argv[1]
unescape = lambda s: s.replace("\\\\", "\0").replace("\\n", "\n").replace("\0", "\\")
stale = 0
records = [r for r in sys.stdin.read().split("\n") if r]
for r in records:
    mid, path, search = r.split("\x1f")[:3]
    full = os.path.join(root, path)
    n = open(full, encoding="utf-8").read().count(unescape(search)) if os.path.isfile(full) else -1
    if n != 1:
        stale += 1
        print(f"[mutation] {mid}: its search text is " + ("in no file " + path if n < 0 else f"{n} times in {path}"), file=sys.stderr)
print(f"[mutation] {len(records) - stale} of {len(records)} mutants find their search text once", file=sys.stderr)
sys.exit(1 if stale else 0)
' "$ROOT" <<<"$records"
  exit $?
fi
if [ $# -gt 0 ]; then
  wanted=" $* "
  records=$(while IFS=$'\x1f' read -r id rest; do
    if [[ "$wanted" == *" $id "* ]]; then printf '%s\x1f%s\n' "$id" "$rest"; fi
  done <<<"$records")
  [ -n "$records" ] || { say "no mutant named $*"; exit 2; }
fi

start=$(date +%s)
mkdir -p "$LOGS"
say "copy of the tree in $SRC, build in $BUILD ($JOBS jobs)"
sync_copy
say "building the unmutated copy (the first run builds everything: minutes)"
if ! build_copy "$LOGS/baseline-build.log"; then
  tail -30 "$LOGS/baseline-build.log" >&2
  say "ERROR: the unmutated copy does not build"
  exit 2
fi
all_tests=$(cut -d $'\x1f' -f5 <<<"$records" | paste -sd '|')
say "running every named test on the unmutated copy"
baseline_rc=0
failed=$(run_tests "$all_tests" "$LOGS/baseline-tests.log") || baseline_rc=$?
if [ "$baseline_rc" -ne 0 ]; then
  say "ERROR: the unmutated copy fails ($failed); see $LOGS/baseline-tests.log"
  exit 2
fi

current=""   # the file holding the mutant now, restored on exit
original=""
restore() {
  if [ -n "$current" ]; then
    printf '%s' "$original" >"$SRC/$current"
    current=""
  fi
}
trap restore EXIT
trap 'exit 130' INT TERM

table=()
bad=0
while IFS=$'\x1f' read -r id file search replace tests; do
  t0=$(date +%s)
  result="" by=""
  if [ ! -f "$SRC/$file" ]; then
    result="ERROR: not applicable ($file does not exist)"
  else
    original=$(cat "$SRC/$file"; printf x)
    original=${original%x}
    current=$file
    arc=0
    apply_mutant "$SRC/$file" "$search" "$replace" || arc=$?
    if [ "$arc" -eq 3 ]; then
      result="ERROR: not applicable (search text not found in $file)"
    elif [ "$arc" -eq 4 ]; then
      result="ERROR: not applicable (search text found more than once in $file)"
    elif [ "$arc" -ne 0 ]; then
      result="ERROR: could not apply (exit $arc)"
    elif ! ninja -C "$BUILD" -j "$JOBS" >"$LOGS/$id-build.log" 2>&1; then
      result="ERROR: does not build (see $LOGS/$id-build.log)"
    else
      trc=0
      by=$(run_tests "$tests" "$LOGS/$id-tests.log") || trc=$?
      case $trc in
        0) result="SURVIVED" ;;
        1) result="killed" ;;
        *) result="ERROR: no test matches '$tests'" ;;
      esac
    fi
    restore
  fi
  [ "$result" = killed ] || bad=1
  secs=$(($(date +%s) - t0))
  by=$(tr '\n' ' ' <<<"$by" | sed 's/ *$//')
  say "$id: $result${by:+ by $by} (${secs}s)"
  table+=("$(printf '| %-34s | %-8s | %s |' "$id" "$result" "${by:--}")")
done <<<"$records"

# Leave the copy built as the repository is (the last mutant's objects rebuilt).
build_copy "$LOGS/final-build.log" || true

echo
printf '| %-34s | %-8s | %s |\n' mutant result "killed by (failed tests)"
printf '|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..36})" "$(printf -- '-%.0s' {1..10})" "---"
printf '%s\n' "${table[@]}"
echo
say "$(wc -l <<<"$records") mutants in $(($(date +%s) - start))s"
if [ "${#table[@]}" -ne "$(wc -l <<<"$records")" ]; then
  say "ERROR: ${#table[@]} of $(wc -l <<<"$records") mutants ran (something read the list's input)"
  exit 1
fi
if [ "$bad" -ne 0 ]; then
  say "FAILED: every mutant must be killed"
  exit 1
fi
say "every mutant was killed"
