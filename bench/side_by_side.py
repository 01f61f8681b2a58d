#!/usr/bin/env python3
"""qkv and its peers side by side in one run: each case alternates the two, round after round.

Run by hand, never by the tests or CI, with a Python that has the peers (the venv of
bench/peers.py and bench/embed_peer.py):

    python3 bench/side_by_side.py --python /tmp/peers/bin/python --threads 2 [--rounds 3]
                                  [--suite gemm,attention,masks,minilm,llama] [--build build]
                                  [--dtype f32,bf16]

On a machine shared with other work the time of one run says little: the load moves in
seconds, and a virtual machine's host may take its CPUs away for whole milliseconds
("steal" in /proc/stat: 30-50% at times on the project's 2-vCPU hosts). Each case therefore runs qkv, then the peer, then qkv again..., `--rounds` times,
and reports the median of each side and the median of the rounds' ratios (peer time / qkv
time, so > 1 means qkv is faster), each ratio taken between two adjacent runs, and the
largest share of CPU time stolen during one of the case's runs (a note follows past 5%).
Cases:

  gemm    y = x . w at the issue's shapes (2048x512x2048, 4096x384x1536, 8192x1536x384,
          4096x4096x4096): `qkv bench gemm --no-baselines --json` against torch.matmul
          (`bench/peers.py --suite gemm --shape MxKxN --json`).
  minilm  all-MiniLM-L6-v2 on 256 sentences of 20 and of 256 tokens: `qkv embed --bench
          --json` against sentence-transformers (`bench/embed_peer.py --json`).
  attention  attention alone, B1 H16 L=S=2048 Dh64, no mask and causal: `qkv bench attn`
          / `attn_causal` against PyTorch's SDPA (`bench/peers.py --case ... --peers
          torch_sdpa`).
  masks   masks that read tensors (the gallery's packed_documents, prefix_lm_lengths and
          padding at B1 H8 L=S=8192 Dh64, with the gallery's inputs): `qkv bench NAME`
          against FlexAttention with `create_block_mask` built in each call, as a user whose
          documents or lengths change per batch must (`bench/peers.py --case NAME --peers
          torch_flex`); also qkv's time against its ideal, the no-mask kernel's time
          (`qkv bench attn --heads 8`, same round) scaled by the kept pairs. f32 only (the
          gallery's variants are f32).
  llama   the Llama-shaped decoder of `qkv-generate --random` (2 layers, hidden 512, vocab
          32000), prefill of 512 and 4096 tokens and a decode step after it: `bench_llama`
          (contiguous cache) against transformers (`bench/peers.py --suite llama --json`).

--dtype f32,bf16 runs every case in each dtype: qkv's graphs in bf16 (on the host's best
tier) against the peer on bf16 tensors (torch.matmul, SDPA, the models cast to
torch.bfloat16). Default: f32.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
GEMM_SHAPES = [(2048, 512, 2048), (4096, 384, 1536), (8192, 1536, 384), (4096, 4096, 4096)]


# The share of the machine's CPU time the hypervisor gave to other guests ("steal", the
# 8th field of /proc/stat's cpu line) during each run of the case being measured.
STEALS = []


def cpu_times():
    """(all CPU time, stolen time) since boot, in clock ticks; (0, 0) off Linux."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    return sum(fields), (fields[7] if len(fields) > 7 else 0)


def run(cmd, env=None):
    total0, steal0 = cpu_times()
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    total1, steal1 = cpu_times()
    if out.returncode != 0:
        sys.exit(f"side_by_side: {' '.join(cmd)} failed ({out.returncode}):\n{out.stderr[-2000:]}")
    if total1 > total0:
        STEALS.append((steal1 - steal0) / (total1 - total0))
    return out.stdout


def json_lines(text):
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def report(name, unit, qkv, peer, lower_is_better=True, steals=None):
    """Medians of both sides, the median of the per-round ratios, and the most CPU time
    stolen during one of the runs (`steals`, else those of STEALS since the last report)."""
    ratios = [(p / q if lower_is_better else q / p) for q, p in zip(qkv, peer)]
    steals = list(STEALS) if steals is None else steals
    STEALS.clear()
    steal = f"  steal {100 * max(steals):.0f}% at most" if steals else ""
    print(f"{name:<34} qkv {statistics.median(qkv):10.2f} {unit}   peer "
          f"{statistics.median(peer):10.2f} {unit}   qkv faster by {statistics.median(ratios):5.2f}x"
          f"  (rounds: {', '.join(f'{r:.2f}' for r in ratios)}){steal}")
    if steals and max(steals) > 0.05:
        print(f"{'':<34} (the hypervisor took {100 * max(steals):.0f}% of the CPU time from this "
              f"machine during a run: its ratio says little)")
    sys.stdout.flush()


def gemm(a, dtype):
    for m, k, n in GEMM_SHAPES:
        qkv, peer = [], []
        for _ in range(a.rounds):
            j = json.loads(run([a.qkv, "bench", "gemm", "--m", str(m), "--k", str(k), "--n", str(n),
                                "--threads", str(a.threads), "--no-baselines", "--json",
                                "--dtype", dtype]))
            qkv.append(j["ms"])
            p = json_lines(run([a.python, os.path.join(HERE, "peers.py"), "--suite", "gemm",
                                "--threads", str(a.threads), "--shape", f"{m}x{k}x{n}", "--json",
                                "--dtype", dtype]))
            if not p[0]["ok"]:
                sys.exit(f"side_by_side: torch.matmul {m}x{k}x{n} disagrees with NumPy")
            peer.append(p[0]["ms"])
        report(f"matmul {dtype} {m}x{k}x{n}", "ms", qkv, peer)


def attention(a, dtype):
    for case in ("attn", "attn_causal"):
        qkv, peer = [], []
        for _ in range(a.rounds):
            j = json.loads(run([a.qkv, "bench", case, "--seq", "2048", "--threads",
                                str(a.threads), "--no-baselines", "--json", "--dtype", dtype]))
            qkv.append(j["ms"])
            p = json_lines(run([a.python, os.path.join(HERE, "peers.py"), "--case", case,
                                "--seq", "2048", "--peers", "torch_sdpa", "--threads",
                                str(a.threads), "--json", "--dtype", dtype]))
            r = p[0]["peers"][0]
            if not r.get("ok"):
                sys.exit(f"side_by_side: SDPA {case} {dtype} is unavailable or wrong: {r}")
            peer.append(r["ms"])
        report(f"{case} {dtype} B1 H16 L2048 Dh64", "ms", qkv, peer)


def masks(a, dtype):
    if dtype != "f32":
        print(f"masks {dtype}: skipped (the gallery's variants are f32)")
        return
    common = ["--seq", "8192", "--threads", str(a.threads), "--no-baselines", "--json"]
    for case in ("packed_documents", "prefix_lm_lengths", "padding"):
        qkv, peer, ideal = [], [], []
        for _ in range(a.rounds):
            j = json.loads(run([a.qkv, "bench", case] + common))
            none = json.loads(run([a.qkv, "bench", "attn", "--heads", "8", "--head-dim", "64"]
                                  + common))
            p = json_lines(run([a.python, os.path.join(HERE, "peers.py"), "--case", case,
                                "--peers", "torch_flex", "--threads", str(a.threads), "--json"]))
            r = p[0]["peers"][0]
            if not r.get("ok"):
                sys.exit(f"side_by_side: FlexAttention {case} is unavailable or wrong: {r}")
            if p[0]["flops"] != j["flops"]:
                sys.exit(f"side_by_side: {case}: qkv and the peer keep different pairs "
                         f"({j['flops']} vs {p[0]['flops']} flops)")
            qkv.append(j["ms"])
            peer.append(r["ms"])
            ideal.append(j["ms"] / (none["ms"] * j["kept_pairs"] / j["pairs"]))
        report(f"{case} B1 H8 L8192 vs Flex+mask", "ms", qkv, peer)
        print(f"{'':<34} kept {100 * j['kept_pairs'] / j['pairs']:.1f}% of the pairs; qkv's time "
              f"vs ideal (no-mask time x kept share): {statistics.median(ideal):.2f} (rounds: "
              f"{', '.join(f'{x:.2f}' for x in ideal)})", flush=True)


def minilm(a, dtype):
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    cases = [(256, 18, 32), (256, 300, 16)]
    for n, words, batch in cases:
        qkv, peer = [], []
        shape = ["--sentences", str(n), "--words", str(words), "--batch", str(batch)]
        for _ in range(a.rounds):
            j = json.loads(run([a.qkv, "embed", "--bench", "--threads", str(a.threads), "--json",
                                "--dtype", dtype] + shape))
            qkv.append(j["cases"][0]["sentences_per_s"])
            p = json.loads(run([a.python, os.path.join(HERE, "embed_peer.py"), "--threads",
                                str(a.threads), "--json", "--dtype", dtype] + shape, env))
            peer.append(p["cases"][0]["sentences_per_s"])
        tokens = 20 if words == 18 else 256
        report(f"all-MiniLM-L6-v2 {dtype} {tokens} tokens, batch {batch}", "sent/s", qkv, peer,
               lower_is_better=False)


def bench_llama_rows(text):
    """context -> (prefill ms, decode step ms) from bench_llama's contiguous-cache rows."""
    rows = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) > 6 and f[1] == "contiguous":
            rows[int(f[0])] = (float(f[2]), float(f[5]))
    return rows


def llama(a, dtype):
    contexts = [512, 4096]
    qkv = {c: ([], []) for c in contexts}
    peer = {c: ([], []) for c in contexts}
    for _ in range(a.rounds):
        rows = bench_llama_rows(run([a.bench_llama, "--threads", str(a.threads), "--context",
                                     ",".join(map(str, contexts)), "--steps", "16",
                                     "--dtype", dtype]))
        for c in contexts:
            qkv[c][0].append(rows[c][0])
            qkv[c][1].append(rows[c][1])
        for r in json_lines(run([a.python, os.path.join(HERE, "peers.py"), "--suite", "llama",
                                 "--threads", str(a.threads), "--context",
                                 ",".join(map(str, contexts)), "--json", "--dtype", dtype])):
            peer[r["context"]][0].append(r["prefill_ms"])
            peer[r["context"]][1].append(r["decode_step_ms"])
    steals = list(STEALS)  # both contexts run in each of the rounds' commands
    for c in contexts:
        report(f"Llama decoder {dtype} prefill {c}", "ms", qkv[c][0], peer[c][0], steals=steals)
        report(f"Llama decoder {dtype} decode step at {c}", "ms", qkv[c][1], peer[c][1],
               steals=steals)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", default=sys.executable, help="a Python with the peers installed")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--suite", default="gemm,minilm,llama")
    ap.add_argument("--dtype", default="f32", help="f32, bf16 or both (comma-separated)")
    ap.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    a = ap.parse_args()
    if a.rounds < 1 or a.threads < 1:
        ap.error("--rounds and --threads must be at least 1")
    a.qkv = os.path.join(a.build, "bin", "qkv")
    a.bench_llama = os.path.join(a.build, "bin", "bench_llama")
    suites = {"gemm": gemm, "attention": attention, "masks": masks, "minilm": minilm,
              "llama": llama}
    for s in a.suite.split(","):
        if s not in suites:
            ap.error(f"unknown suite '{s}' (gemm, attention, masks, minilm, llama)")
    dtypes = a.dtype.split(",")
    if any(d not in ("f32", "bf16") for d in dtypes):
        ap.error(f"--dtype takes f32, bf16 or both, got '{a.dtype}'")
    print(f"side by side, {a.threads} threads, {a.rounds} rounds; host: "
          f"{open('/proc/cpuinfo').read().split('model name')[1].split(':')[1].splitlines()[0].strip()}")
    for d in dtypes:
        for s in a.suite.split(","):
            suites[s](a, d)


if __name__ == "__main__":
    main()
