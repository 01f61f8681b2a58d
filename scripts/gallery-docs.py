#!/usr/bin/env python3
"""docs/gallery.md and its pictures, kept true to examples/gallery/ and to `qkv show`.

  gallery-docs.py QKV            writes docs/gallery/NAME.png for every variant whose
                                 attention has a mask: `QKV show NAME --seq 256 --q-tile 32
                                 --kv-tile 32 --png ...` (tiles of 32 whatever the host's
                                 vector width, so that the pictures do not depend on it)
  gallery-docs.py --check QKV    fails unless those pictures are what QKV draws now (pixel
                                 for pixel), no other picture is there, and docs/gallery.md
                                 shows each variant's code exactly as its file has it (the
                                 part inside `namespace {`) and links its picture

The PNGs are compared by their pixels, decoded with zlib alone: qkv writes every row
unfiltered, so the decompressed image data of two equal pictures is equal.
"""
import os
import re
import struct
import subprocess
import sys
import tempfile
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VARIANTS = os.path.join(ROOT, "examples", "gallery")
PICTURES = os.path.join(ROOT, "docs", "gallery")
DOC = os.path.join(ROOT, "docs", "gallery.md")
SHOW = ["--seq", "256", "--q-tile", "32", "--kv-tile", "32"]


def variant_names():
    """The variants in the order of variants.cpp."""
    with open(os.path.join(VARIANTS, "variants.cpp")) as f:
        return re.findall(r"&(\w+)[,}\s]", f.read())


def code_of(name):
    """The body of a variant's file between `namespace {` and `} // namespace`."""
    with open(os.path.join(VARIANTS, name + ".cpp")) as f:
        text = f.read()
    m = re.search(r"\nnamespace \{\n\n(.*?)\n\} // namespace\n", text, re.S)
    if not m:
        sys.exit(f"{name}.cpp: no `namespace {{ ... }} // namespace` block")
    return m.group(1).strip("\n")


def show(qkv, name, png):
    """Runs `qkv show`; returns False when the variant has no mask to draw."""
    p = subprocess.run([qkv, "show", name, *SHOW, "--png", png], capture_output=True, text=True)
    if p.returncode != 0:
        if "has no attention op" in p.stderr:
            return False
        sys.exit(f"qkv show {name} failed:\n{p.stderr}")
    if "mask_mod: (none" in p.stdout:
        os.remove(png)
        return False
    return True


def pixels(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit(f"{path}: not a PNG")
    pos, header, idat = 8, None, b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    return header, zlib.decompress(idat)


def write(qkv):
    os.makedirs(PICTURES, exist_ok=True)
    for name in variant_names():
        png = os.path.join(PICTURES, name + ".png")
        print(("wrote " if show(qkv, name, png) else "no mask: ") + name)


def check(qkv):
    errors = []
    with open(DOC) as f:
        doc = f.read()
    expected = set()
    with tempfile.TemporaryDirectory() as tmp:
        for name in variant_names():
            if f"## {name}" not in doc:
                errors.append(f"docs/gallery.md has no section '## {name}'")
            if "```cpp\n" + code_of(name) + "\n```" not in doc:
                errors.append(f"docs/gallery.md does not show examples/gallery/{name}.cpp's code "
                              "as it is (the part inside `namespace {`)")
            png = os.path.join(tmp, name + ".png")
            if not show(qkv, name, png):
                continue
            expected.add(name + ".png")
            committed = os.path.join(PICTURES, name + ".png")
            if f"(gallery/{name}.png)" not in doc:
                errors.append(f"docs/gallery.md does not show gallery/{name}.png")
            if not os.path.exists(committed):
                errors.append(f"docs/gallery/{name}.png is missing")
            elif pixels(committed) != pixels(png):
                errors.append(f"docs/gallery/{name}.png is not what `qkv show {name} "
                              f"{' '.join(SHOW)}` draws now")
    if os.path.isdir(PICTURES):
        for extra in sorted(set(os.listdir(PICTURES)) - expected):
            errors.append(f"docs/gallery/{extra} belongs to no variant with a mask")
    for e in errors:
        print("FAIL: " + e)
    if errors:
        print("(scripts/gallery-docs.py build/bin/qkv rewrites the pictures)")
        sys.exit(1)
    print(f"docs/gallery.md and {len(expected)} pictures are up to date")


def main():
    args = sys.argv[1:]
    if args[:1] == ["--check"] and len(args) == 2:
        check(args[1])
    elif len(args) == 1 and not args[0].startswith("-"):
        write(args[0])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
