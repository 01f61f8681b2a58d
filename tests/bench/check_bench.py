#!/usr/bin/env python3
"""Checks `qkv bench` from the outside (run by ctest; see CMakeLists.txt).

  check_bench.py QKV json [--openblas ON|OFF] -- BENCH_ARGS...
      runs `QKV bench BENCH_ARGS --json`: exit 0, stdout exactly one JSON object with the
      documented fields, flops counted as documented (recomputed here; bytes too for a
      decode step over a KV cache), every baseline present and agreeing with qkv.
  check_bench.py QKV help
      `QKV bench --help` documents every option.
  check_bench.py QKV error TEXT -- BENCH_ARGS...
      `QKV bench BENCH_ARGS` exits non-zero and says TEXT on stderr.
  check_bench.py QKV gemm [--openblas ON|OFF] -- GEMM_ARGS...
      runs `QKV bench gemm GEMM_ARGS --json`: the documented fields, 2*M*K*N flops, the
      OpenBLAS baseline (when built) agreeing with qkv; `qkv bench gemm --help` documents
      every option.
"""
import json
import math
import os
import subprocess
import sys

OPTIONS = ["--batch", "--heads", "--kv-heads", "--seq", "--kv-len", "--head-dim", "--window",
           "--paged", "--dims", "--threads", "--json", "--repeat", "--no-baselines"]
FIELDS = ["name", "shape", "mask", "threads", "isa", "ms", "runs", "compile_ms", "compile_runs",
          "compile_cold_ms", "compile_warm_ms", "compile_warm_runs", "compile_warm_cache",
          "flops", "gflops", "peak_gflops", "pct_peak", "bytes", "read_gbs", "bandwidth_gbs",
          "pct_bandwidth", "baselines", "tolerance", "wall_s", "steal"]
BLOCKS = {"seed", "mha", "causal", "gqa", "cross"}
# Variants of examples/gallery/ whose masks are recomputed here, pair by pair, from their
# definitions (query i, key j, window W); blocks are the self-attention ones with W^O.
VARIANT_MASKS = {
    "causal_lm": lambda i, j, W: j <= i,
    "sliding_window": lambda i, j, W: 0 <= i - j < W,
    "prefix_lm": lambda i, j, W: j <= i or j < 64,
    "block_diagonal": lambda i, j, W: i // 64 == j // 64,
    "alibi": lambda i, j, W: j <= i,
    "multihead": lambda i, j, W: True,
    "rope_block": lambda i, j, W: j <= i,
    # graphs of tests/tools/user_graphs.cpp (a user's tool): prefix_alibi's prefix is
    # 13 * b tokens, none at the batch of 1 it is benchmarked at
    "user_prefix_lm": lambda i, j, W: j <= i or j < 16,
    "prefix_alibi": lambda i, j, W: j <= i,
}
VARIANT_BLOCKS = {"multihead", "rope_block"}
# Graphs the baselines do not compute (a score_mod, RoPE, a mask that reads the batch).
NO_BASELINES = {"alibi", "rope_block", "prefix_alibi"}


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def close(a, b, rel=1e-6):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-30)


def kept_pairs(mask, L, S, W):
    if mask == "none":
        return L * S
    if mask == "cache":  # S cached keys, then query i sees the new keys up to itself
        return sum(S + i + 1 for i in range(L))
    if mask == "causal":
        return sum(min(i + 1, S) for i in range(L))
    return sum(max(0, min(i + 1, S) - max(0, i - W + 1)) for i in range(L))


def expected_flops(j):
    s = j["shape"]
    B, H, Hkv, L, S, Dh = (s[k] for k in ("batch", "heads", "kv_heads", "seq", "kv_len",
                                           "head_dim"))
    if j["name"] in VARIANT_MASKS:
        keep = VARIANT_MASKS[j["name"]]
        pairs = sum(keep(i, k, s.get("window", 0)) for i in range(L) for k in range(L))
        if j["kept_pairs"] != B * H * pairs or j["pairs"] != B * H * L * L:
            fail(f"kept_pairs {j['kept_pairs']} of {j['pairs']}, expected {B * H * pairs} of "
                 f"{B * H * L * L}")
        f = 4 * B * H * Dh * pairs
        if j["name"] in VARIANT_BLOCKS:
            f += 2 * B * L * (H * Dh) ** 2 * 4
        return f
    f = 4 * B * H * Dh * kept_pairs(j["mask"], L, S, s.get("window", 0))
    if j["name"] in BLOCKS:
        D, Dkv = H * Dh, Hkv * Dh
        out_proj = j["name"] != "seed"
        f += 2 * B * L * D * D * (2 if out_proj else 1) + 2 * 2 * B * S * D * Dkv
    return f


ELEMENT_BYTES = {"f32": 4, "bf16": 2, "f16": 2}


def check_cache_bytes(j):
    """A decode step over a KV cache reads the S cached k, v rows it attends (not the
    whole pool), the new ones, q, lengths (i64) and the block table (i32, ceil(S / page)
    per sequence) and writes out, all of the graph's dtype but the indices."""
    s = j["shape"]
    B, H, Hkv, L, S, Dh = (s[k] for k in ("batch", "heads", "kv_heads", "seq", "kv_len",
                                           "head_dim"))
    if "paged" not in s or (s["paged"] and "page_rows" not in s):
        fail(f"shape {s} lacks paged (and page_rows when paged)")
    table = B * -(-S // s["page_rows"]) if s["paged"] else 0
    e = ELEMENT_BYTES[s["dtype"]]
    want = e * (2 * B * H * L * Dh + 2 * B * Hkv * (S + L) * Dh) + 8 * B + 4 * table
    if j["bytes"] != want:
        fail(f"bytes {j['bytes']} != {want} (cached and new k, v rows, q, out, lengths, table)")


def check_json(qkv, openblas, args):
    # The cache on (whatever the caller's QKV_CACHE says) for the warm compiles, which use
    # a cache folder of the benchmark's own.
    env = {**os.environ, "QKV_CACHE": "1"}
    p = subprocess.run([qkv, "bench", *args, "--json"], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        fail(f"exit {p.returncode}\n{p.stderr}")
    try:
        j = json.loads(p.stdout)
    except json.JSONDecodeError as e:
        fail(f"stdout is not one JSON object ({e}):\n{p.stdout}")
    if not isinstance(j, dict):
        fail("stdout is JSON but not an object")
    missing = [f for f in FIELDS if f not in j]
    if missing:
        fail(f"missing fields {missing}")
    if j["runs"] < 1 or j["ms"] <= 0 or j["peak_gflops"] <= 0 or j["bandwidth_gbs"] <= 0:
        fail("runs, ms, peak and bandwidth must be positive")
    check_steal(j)
    if j["compile_ms"] != j["compile_cold_ms"] or j["compile_cold_ms"] <= 0:
        fail("compile_ms must be compile_cold_ms, and positive")
    # The warm compiles load the kernel the cold ones stored in the benchmark's own cache
    # folder: no pipeline, no LLVM, so well under the cold time.
    if j["compile_warm_cache"] != "hit" or j["compile_warm_ms"] is None:
        fail(f"the warm compiles did not come from the kernel cache: {j['compile_warm_cache']}")
    if not 0 < j["compile_warm_ms"] < j["compile_cold_ms"]:
        fail(f"compile_warm_ms {j['compile_warm_ms']} not below compile_cold_ms "
             f"{j['compile_cold_ms']}")
    if j["flops"] != expected_flops(j):
        fail(f"flops {j['flops']} != {expected_flops(j)} (4*B*H*Dh*pairs + projections)")
    if j["mask"] == "cache":
        check_cache_bytes(j)
    if not close(j["gflops"], j["flops"] / j["ms"] / 1e6):
        fail("gflops != flops / ms")
    if not close(j["pct_peak"], 100 * j["gflops"] / j["peak_gflops"]):
        fail("pct_peak != 100 * gflops / peak_gflops")
    if not close(j["read_gbs"], j["bytes"] / j["ms"] / 1e6):
        fail("read_gbs != bytes / ms")
    if not close(j["pct_bandwidth"], 100 * j["read_gbs"] / j["bandwidth_gbs"]):
        fail("pct_bandwidth != 100 * read_gbs / bandwidth_gbs")
    want = {"reference"} | ({"openblas"} if openblas == "ON" else set())
    if "dtype" not in j["shape"]:
        fail(f"shape {j['shape']} lacks dtype")
    if j["mask"] == "none" and j["name"].startswith("attn") and j["name"] != "attn_decode":
        s = j["shape"]
        B, H, L, S, Dh = (s[k] for k in ("batch", "heads", "seq", "kv_len", "head_dim"))
        want_bytes = ELEMENT_BYTES[s["dtype"]] * (2 * B * H * L * Dh + 2 * B * H * S * Dh)
        if j["bytes"] != want_bytes:
            fail(f"bytes {j['bytes']} != {want_bytes} (q, k, v read, out written, {s['dtype']})")
    if j["name"] in NO_BASELINES or j["shape"]["dtype"] != "f32":
        want = set()
        if "baselines_not_run" not in j:
            fail("no baselines_not_run field saying why the baselines did not run")
    if set(j["baselines"]) != want:
        fail(f"baselines {sorted(j['baselines'])}, expected {sorted(want)}")
    for name, b in j["baselines"].items():
        for f in ("ms", "ratio", "runs", "max_abs_err", "ok"):
            if f not in b:
                fail(f"baseline {name} has no {f}")
        if not b["ok"] or not b["max_abs_err"] <= j["tolerance"]:
            fail(f"baseline {name} disagrees with qkv: max_abs_err {b['max_abs_err']}")
        if not close(b["ratio"], b["ms"] / j["ms"]):
            fail(f"baseline {name}: ratio != baseline ms / qkv ms")
    print(f"ok: {j['name']} {j['shape']} mask={j['mask']} flops={j['flops']:.0f} "
          f"baselines={sorted(j['baselines'])}")


def check_help(qkv):
    p = subprocess.run([qkv, "bench", "--help"], capture_output=True, text=True)
    if p.returncode != 0:
        fail(f"qkv bench --help: exit {p.returncode}")
    undocumented = [o for o in OPTIONS if o not in p.stdout]
    if undocumented:
        fail(f"qkv bench --help does not mention {undocumented}")
    for field in FIELDS:
        if field not in p.stdout:
            fail(f"qkv bench --help does not describe the JSON field {field}")
    print("ok: every option and JSON field documented")


def check_error(qkv, text, args):
    p = subprocess.run([qkv, "bench", *args], capture_output=True, text=True)
    if p.returncode == 0:
        fail(f"qkv bench {' '.join(args)} succeeded; expected an error saying {text!r}")
    if text not in p.stderr:
        fail(f"stderr does not say {text!r}:\n{p.stderr}")
    print(f"ok: exit {p.returncode}: {p.stderr.strip()}")


GEMM_OPTIONS = ["--m", "--k", "--n", "--threads", "--bias", "--json", "--repeat", "--no-baselines"]
GEMM_FIELDS = ["name", "m", "k", "n", "bias", "threads", "isa", "ms", "min_ms", "runs", "gflops",
               "pct_peak", "peak_gflops", "bandwidth_gbs", "compile_ms", "baselines", "steal"]


def check_steal(j):
    """steal is a share of CPU time, or -1 where /proc/stat said nothing."""
    if not (j["steal"] == -1 or 0 <= j["steal"] <= 1):
        fail(f"steal {j['steal']} is neither -1 nor a share in [0, 1]")


def check_gemm(qkv, openblas, args):
    p = subprocess.run([qkv, "bench", "gemm", "--help"], capture_output=True, text=True)
    missing = [o for o in GEMM_OPTIONS + GEMM_FIELDS if o not in p.stdout]
    if p.returncode != 0 or missing:
        fail(f"qkv bench gemm --help: exit {p.returncode}, does not mention {missing}")
    p = subprocess.run([qkv, "bench", "gemm", *args, "--json"], capture_output=True, text=True)
    if p.returncode != 0:
        fail(f"qkv bench gemm {' '.join(args)}: exit {p.returncode}\n{p.stderr}")
    j = json.loads(p.stdout)
    for f in GEMM_FIELDS:
        if f not in j:
            fail(f"no field {f!r} in {j}")
    check_steal(j)
    flops = 2 * j["m"] * j["k"] * j["n"]
    if not close(j["gflops"], flops / (j["ms"] * 1e6), 1e-3):
        fail(f"gflops {j['gflops']} is not 2*M*K*N / ms ({flops / (j['ms'] * 1e6)})")
    if not close(j["pct_peak"], 100 * j["gflops"] / j["peak_gflops"], 1e-3):
        fail("pct_peak is not gflops / peak_gflops")
    if openblas == "ON":
        b = j["baselines"].get("openblas")
        if not b or not b["ok"] or not close(b["ratio"], b["ms"] / j["ms"], 1e-6):
            fail(f"the openblas baseline is missing, wrong or its ratio is off: {b}")
    print(f"ok: {j['gflops']:.2f} GFLOP/s, {j['pct_peak']:.1f}% of peak, baselines "
          f"{sorted(j['baselines'])}")


def main(argv):
    qkv, mode, rest = argv[1], argv[2], argv[3:]
    args = rest[rest.index("--") + 1:] if "--" in rest else []
    opts = rest[:rest.index("--")] if "--" in rest else rest
    if mode == "json":
        check_json(qkv, opts[opts.index("--openblas") + 1] if "--openblas" in opts else "OFF",
                   args)
    elif mode == "help":
        check_help(qkv)
    elif mode == "error":
        check_error(qkv, opts[0], args)
    elif mode == "gemm":
        check_gemm(qkv, opts[opts.index("--openblas") + 1] if "--openblas" in opts else "OFF",
                   args)
    else:
        fail(f"unknown mode {mode}")


if __name__ == "__main__":
    main(sys.argv)
