#!/usr/bin/env python3
"""`qkv embed` on a model with a NaN weight prints nan, not plausible numbers (ctest).

    check_embed_nan.py QKV_BINARY

Copies all-MiniLM-L6-v2 (from $QKV_MODEL_CACHE, else ~/.cache/qkv/models) into a
temporary folder with the first element of embeddings.LayerNorm.weight set to NaN, runs
`qkv embed --model DIR` on two sentences, and requires the norms and every entry of the
cosine table to read nan (a NaN cosine once printed as 0.000, which looks like an answer).
"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile


def model_dir():
    cache = os.environ.get("QKV_MODEL_CACHE") or os.path.join(
        os.environ.get("HOME") or "/", ".cache", "qkv", "models")
    return os.path.join(cache, "all-MiniLM-L6-v2")


def main():
    qkv, src = sys.argv[1], model_dir()
    if not os.path.exists(os.path.join(src, "model.safetensors")):
        sys.exit(f"all-MiniLM-L6-v2 is not in {src}; run scripts/fetch-model.sh minilm")
    with tempfile.TemporaryDirectory(prefix="qkv_embed_nan_") as tmp:
        for name in os.listdir(src):
            if name != "model.safetensors" and not name.startswith("."):
                os.symlink(os.path.join(src, name), os.path.join(tmp, name))
        with open(os.path.join(src, "model.safetensors"), "rb") as f:
            data = bytearray(f.read())
        n = struct.unpack("<Q", data[:8])[0]
        entry = json.loads(data[8:8 + n])["embeddings.LayerNorm.weight"]
        assert entry["dtype"] == "F32", entry
        at = 8 + n + entry["data_offsets"][0]
        data[at:at + 4] = struct.pack("<f", float("nan"))
        with open(os.path.join(tmp, "model.safetensors"), "wb") as f:
            f.write(data)
        out = subprocess.run([qkv, "embed", "--model", tmp, "--threads", "2", "A man plays.",
                              "Stocks fell."], capture_output=True, text=True)
    text = out.stdout + out.stderr
    print(text)
    if out.returncode != 0:
        sys.exit(f"qkv embed exited with {out.returncode}")
    norms = re.findall(r"norm (\S+):", text)
    rows = re.findall(r"^ *\[\d\]((?: +\S+)+)$", text.split("cosine similarity:")[-1], re.M)
    cells = [c for r in rows for c in r.split() if not c.startswith("[")]  # not the header
    failures = []
    norms = [x.lstrip("-") for x in norms]  # a NaN's sign bit prints as -nan
    cells = [c.lstrip("-") for c in cells]
    if norms != ["nan", "nan"]:
        failures.append(f"norms {norms}, expected nan nan")
    if len(cells) != 4 or any(c != "nan" for c in cells):
        failures.append(f"cosine cells {cells}, expected four nan")
    if failures:
        sys.exit("FAILED:\n  " + "\n  ".join(failures))
    print("ok: a NaN weight shows as nan in the norms and the cosine table")


if __name__ == "__main__":
    main()
