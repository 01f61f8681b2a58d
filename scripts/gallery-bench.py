#!/usr/bin/env python3
"""Measures every variant of the gallery against the no-mask kernel at the same shape and
prints docs/gallery.md's speed table.

  gallery-bench.py QKV [--threads T] [--seq L] [--passes P] [NAME ...]

For each variant (all of examples/gallery/ by default), P times (default 3): runs the
no-mask kernel at the same shape, `QKV bench attn --heads 8 --head-dim 64` for the variants
that are attention alone or `QKV bench mha --heads 8 --head-dim 64` (D = 512) for the
blocks, then `QKV bench NAME`, both with `--seq L --threads T --json` (default L = 2048,
T = 2), the baselines only in the first pass. Each time in the table is the median over
the passes of qkv bench's medians; "time vs no mask" is the median of the passes' ratios,
each between two runs made one after the other, which a machine shared with other work
disturbs least. Progress goes to stderr.
"""
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BLOCK_NAMES = {"multihead", "grouped_query", "multi_query", "cross_attention", "linformer",
               "linear_attn", "sinusoidal_block", "rope_block"}


def variant_names():
    with open(os.path.join(ROOT, "examples", "gallery", "variants.cpp")) as f:
        return re.findall(r"&(\w+)[,}\s]", f.read())


def bench(qkv, args):
    print("running qkv bench " + " ".join(args), file=sys.stderr, flush=True)
    p = subprocess.run([qkv, "bench", *args, "--json"], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"qkv bench {' '.join(args)} failed:\n{p.stderr}")
    return json.loads(p.stdout)


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def main(argv):
    if not argv or argv[0].startswith("-"):
        sys.exit(__doc__)
    qkv, rest = argv[0], argv[1:]
    opts = {"--threads": "2", "--seq": "2048", "--passes": "3"}
    for key in opts:
        if key in rest:
            i = rest.index(key)
            opts[key] = rest[i + 1]
            del rest[i:i + 2]
    names = rest or variant_names()
    common = ["--seq", opts["--seq"], "--threads", opts["--threads"]]
    ref_args = {"attention": ["attn", "--batch", "1", "--heads", "8", "--head-dim", "64"],
                "block": ["mha", "--batch", "1", "--heads", "8", "--head-dim", "64"]}
    runs = {name: [] for name in names}  # (variant JSON, no-mask JSON) per pass
    for p in range(int(opts["--passes"])):
        for name in names:
            kind = "block" if name in BLOCK_NAMES else "attention"
            ref = bench(qkv, [*ref_args[kind], *common, "--no-baselines"])
            var = bench(qkv, [name, *common, *([] if p == 0 else ["--no-baselines"])])
            runs[name].append((var, ref))
    print("| variant | kept pairs | qkv ms | no-mask ms | time vs no mask | GFLOP/s | "
          "reference ms | OpenBLAS ms |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name in names:
        first = runs[name][0][0]
        ms = median([v["ms"] for v, _ in runs[name]])
        ref_ms = median([r["ms"] for _, r in runs[name]])
        ratio = median([v["ms"] / r["ms"] for v, r in runs[name]])
        kept = f"{100.0 * first['kept_pairs'] / first['pairs']:.1f}%" if first["pairs"] else "-"
        print(f"| {name} | {kept} | {ms:.1f} | {ref_ms:.1f} | {ratio:.2f} | "
              f"{first['flops'] / ms / 1e6:.1f} | {base(first, 'reference')} | "
              f"{base(first, 'openblas')} |", flush=True)


def base(j, name):
    b = j["baselines"].get(name)
    return f"{b['ms']:.1f}" if b else "-"


if __name__ == "__main__":
    main(sys.argv[1:])
