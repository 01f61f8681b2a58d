#!/usr/bin/env bash
# Downloads lizard (a code-complexity analyser, pure Python) and the two packages it
# imports into qkv's tool cache, as wheels that Python imports from where they lie: the
# ctest `code_function_length` runs it (tests/function_length.py). Nothing happens when
# they are already there.
#
#   scripts/fetch-lizard.sh          download if missing
#   scripts/fetch-lizard.sh --dir    print the directory of the wheels
#
# The cache is $QKV_TOOL_CACHE, by default ~/.cache/qkv/tools. The download needs pip
# (`python3 -m pip download --no-deps`, which installs nothing) and PyPI. Versions are
# pinned, so every machine counts lines the same way.
set -euo pipefail

CACHE=${QKV_TOOL_CACHE:-$HOME/.cache/qkv/tools}
dest=$CACHE/lizard
wheels=(lizard==1.24.3 pathspec==1.1.1 pygments==2.21.0)

if [ "${1:-}" = "--dir" ]; then
  echo "$dest"
  exit 0
fi
[ $# -eq 0 ] || { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
if [ -f "$dest/.complete" ]; then
  echo "[fetch-lizard] lizard is in $dest"
  exit 0
fi
mkdir -p "$CACHE"
work=$(mktemp -d "$CACHE/.fetch-lizard.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "[fetch-lizard] downloading ${wheels[*]} from PyPI into $dest"
python3 -m pip download --no-deps --only-binary=:all: --quiet --disable-pip-version-check \
  -d "$work" "${wheels[@]}"
touch "$work/.complete"
rm -rf "$dest"
mv "$work" "$dest"
trap - EXIT
echo "[fetch-lizard] done"
