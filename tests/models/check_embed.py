#!/usr/bin/env python3
"""Checks `qkv embed --json` against sentence-transformers' fixtures (ctest runs this).

    check_embed.py QKV_BINARY DATA_DIR [--tp N MPIRUN...]

Runs `qkv embed --json --threads 2` on the fixture sentences (data/minilm_sentences.json)
and requires, per sentence, the token ids to equal sentence-transformers' and the
embedding to be within cosine >= 0.99999 and max abs diff <= 1e-4 of
data/minilm_embeddings.npy; then runs `--reference` on two short sentences and requires
the interpreter to agree as closely. With --tp N it runs `MPIRUN... QKV_BINARY embed --tp
N --threads 1` instead (tensor parallelism over N ranks), under the same rule, without the
reference (one process only). Plain python3: the .npy is read here.
"""
import ast
import json
import math
import struct
import subprocess
import sys

MIN_COSINE, MAX_ABS_DIFF = 0.99999, 1e-4


def load_npy_f32(path):
    """A little-endian float32 C-order .npy (format 1.0) as a list of rows."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:6] == b"\x93NUMPY", path
    n = struct.unpack("<H", data[8:10])[0]
    header = ast.literal_eval(data[10:10 + n].decode("latin1"))
    assert header["descr"] == "<f4" and not header["fortran_order"], header
    rows, cols = header["shape"]
    values = struct.unpack(f"<{rows * cols}f", data[10 + n:10 + n + 4 * rows * cols])
    return [list(values[r * cols:(r + 1) * cols]) for r in range(rows)]


def agreement(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    cos = dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))
    return cos, max(abs(x - y) for x, y in zip(a, b))


LAUNCH = []  # --tp: mpirun and its options, then qkv embed --tp N


def embed(qkv, args):
    threads = ["--threads", "1"] if LAUNCH else ["--threads", "2"]
    out = subprocess.run(LAUNCH[:-2] + [qkv, "embed", "--json"] + threads + LAUNCH[-2:] + args,
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"qkv embed exited with {out.returncode}:\n{out.stderr}")
    return json.loads(out.stdout)


def main():
    qkv, data = sys.argv[1], sys.argv[2]
    if len(sys.argv) > 3:
        assert sys.argv[3] == "--tp" and len(sys.argv) > 5, sys.argv
        LAUNCH.extend(sys.argv[5:] + ["--tp", sys.argv[4]])
    with open(f"{data}/minilm_sentences.json", encoding="utf-8") as f:
        fixture = json.load(f)
    want = load_npy_f32(f"{data}/minilm_embeddings.npy")
    got = embed(qkv, fixture["sentences"])
    failures = []
    worst_cos, worst_diff = 1.0, 0.0
    for i, s in enumerate(got["sentences"]):
        if s["text"] != fixture["sentences"][i]:
            failures.append(f"sentence {i}: text came back as {s['text']!r}")
        if s["ids"] != fixture["input_ids"][i]:
            failures.append(f"sentence {i}: ids {s['ids']} != {fixture['input_ids'][i]}")
        cos, diff = agreement(s["embedding"], want[i])
        worst_cos, worst_diff = min(worst_cos, cos), max(worst_diff, diff)
        if cos < MIN_COSINE or diff > MAX_ABS_DIFF:
            failures.append(f"sentence {i}: cosine {cos:.9f}, max abs diff {diff:.3g}")
    for i, row in enumerate(got["cosine"]):
        if abs(row[i] - 1) > 1e-5:
            failures.append(f"cosine matrix: [{i}][{i}] = {row[i]}")
    print(f"qkv embed vs sentence-transformers: min cosine {worst_cos:.9f}, "
          f"max abs diff {worst_diff:.3g} over {len(want)} sentences")

    if LAUNCH:
        print(f"(tensor parallel: {' '.join(LAUNCH)})")
    else:
        short = [fixture["sentences"][0], fixture["sentences"][6]]
        ref = embed(qkv, ["--reference"] + short)
        for i, s in enumerate(ref["sentences"]):
            r = s["reference"]
            print(f"--reference, sentence {i}: cosine {r['cosine']:.9f}, "
                  f"max abs diff {r['max_abs_diff']:.3g}")
            if r["cosine"] < MIN_COSINE or r["max_abs_diff"] > MAX_ABS_DIFF:
                failures.append(f"--reference sentence {i}: {r}")
    if failures:
        sys.exit("FAILED:\n  " + "\n  ".join(failures))
    print("ok")


if __name__ == "__main__":
    main()
