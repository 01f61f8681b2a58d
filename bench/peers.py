#!/usr/bin/env python3
"""Peers of qkv at the reference shapes of `qkv bench`: PyTorch SDPA (and FlexAttention), ONNX Runtime, torch matmul, transformers' Llama.

Run by hand, never by the tests or CI, from a virtual environment with whichever of the
peers you want to measure (each is skipped, with the reason, when it is not installed):

    python3 -m venv /tmp/peers && . /tmp/peers/bin/activate
    pip install numpy onnx onnxruntime               # ONNX Runtime's MultiHeadAttention
    pip install torch                                # SDPA, FlexAttention (CPU build is enough)
    python3 bench/peers.py --threads 2               # every case below
    python3 bench/peers.py --threads 2 --case attn --seq 2048 --json
    python3 bench/peers.py --threads 2 --case attn --seq 2048 --dtype bf16  # SDPA in bf16
    python3 bench/peers.py --threads 2 --suite gemm  # torch matmul (qkv bench gemm's shapes)
    python3 bench/peers.py --threads 2 --suite gemm --shape 640x384x1536  # one shape
    pip install transformers
    python3 bench/peers.py --threads 2 --suite llama # qkv-generate --random's model

Cases and counting are those of `qkv bench` (docs/compiler.md, "Benchmarks"): attention
alone (no mask, causal, sliding window of 256 keys) at B=1 H=16 Dh=64 and L=S=2048, 8192;
decode (1 query over 32768 keys, H=8, Dh=128); 1, 4, 8 and 16 queries over 8192 keys (H=32,
Dh=128, `qkv bench attn --seq L --kv-len 8192 --heads 32 --head-dim 128`); the MHA block
(B=1 L=2048 H=8 Dh=64, D=512); the gallery's masks that read tensors (packed_documents,
prefix_lm_lengths, padding at B=1 H=8 L=S=8192 Dh=64), with the gallery's doc ids,
prefixes and lengths (its std::mt19937_64 stream, same seeds), where FlexAttention builds
its block mask with create_block_mask in every call (the tensors may change per batch)
and SDPA gets a boolean mask built before its timed runs.
--suite gemm: torch.matmul (f32; --dtype bf16 for bf16) of x (M, K) and w (K, N) at the shapes
of `qkv bench gemm` (2048x512x2048, 4096x384x1536, 8192x1536x384, 4096x4096x4096 and the
all-MiniLM-L6-v2 projections at 20 tokens x 32 sentences, 640x384x384, 640x384x1536,
640x1536x384), 2*M*K*N flops, checked against NumPy in f64. --suite llama:
transformers' LlamaForCausalLM with random weights at `qkv-generate --random`'s default
size (2 layers, hidden 512, 8 heads, intermediate 1376, vocab 32000): prefill of a random
prompt of --context tokens (512 and 4096) with logits_to_keep=1 (the last position's
logits, what generation needs and what qkv computes), then 16 greedy decode steps over
the cache, the median step reported. all-MiniLM-L6-v2 under sentence-transformers is
bench/embed_peer.py.
Flops are 4*B*H*Dh*(kept query-key pairs), plus 2*M*K*N per projection for the block;
times are medians after a warm-up (>= 3 runs and >= 1 s, at most ~10 s per peer). Every
peer's output is checked against a NumPy reference on the same inputs (f32, max abs error
<= 1e-3 * max(1, max |reference|)); a peer that disagrees is reported as wrong.
"""
import argparse
import functools
import json
import math
import statistics
import sys
import time

import numpy as np

CASES = [
    # name, mask, batch, heads, seq, kv_len, head_dim
    ("attn", "none", 1, 16, 2048, 2048, 64),
    ("attn_causal", "causal", 1, 16, 2048, 2048, 64),
    ("attn_window", "window", 1, 16, 2048, 2048, 64),
    ("attn", "none", 1, 16, 8192, 8192, 64),
    ("attn_causal", "causal", 1, 16, 8192, 8192, 64),
    ("attn_window", "window", 1, 16, 8192, 8192, 64),
    ("attn_decode", "none", 1, 8, 1, 32768, 128),
    # a few queries over a long context (speculative tokens, a chunk of a prompt): qkv's
    # attn with the query length bound at run time, `qkv bench attn --seq L --kv-len 8192
    # --heads 32 --head-dim 128`
    ("attn", "none", 1, 32, 1, 8192, 128),
    ("attn", "none", 1, 32, 4, 8192, 128),
    ("attn", "none", 1, 32, 8, 8192, 128),
    ("attn", "none", 1, 32, 16, 8192, 128),
    ("mha", "none", 1, 8, 2048, 2048, 64),
    # masks that read their lengths or ids from tensors, at the gallery's shape for them
    # (`qkv bench packed_documents --seq 8192`), with the gallery's inputs (DATA_MASKS)
    ("packed_documents", "documents", 1, 8, 8192, 8192, 64),
    ("prefix_lm_lengths", "prefix", 1, 8, 8192, 8192, 64),
    ("padding", "padding", 1, 8, 8192, 8192, 64),
]
WINDOW = 256
DATA_MASKS = ("documents", "prefix", "padding")
MASK64 = (1 << 64) - 1


def mt19937_64(seed):
    """C++'s std::mt19937_64 seeded with `seed`: a function returning its next output."""
    n, m = 312, 156
    mt = [seed & MASK64]
    for i in range(1, n):
        mt.append((6364136223846793005 * (mt[-1] ^ (mt[-1] >> 62)) + i) & MASK64)
    at = [n]

    def next_value():
        if at[0] >= n:
            for i in range(n):
                x = (mt[i] & ~0x7FFFFFFF & MASK64) | (mt[(i + 1) % n] & 0x7FFFFFFF)
                mt[i] = mt[(i + m) % n] ^ (x >> 1) ^ (0xB5026F5AA96619E9 if x & 1 else 0)
            at[0] = 0
        y = mt[at[0]]
        at[0] += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        return (y ^ (y >> 43)) & MASK64

    return next_value


@functools.lru_cache(maxsize=None)
def mask_data(mask, b, l):
    """The tensor a data mask reads, as examples/gallery/ makes it (same generator, seed and
    rule): documents: doc[b, i], lengths 1 to L/4 numbered along each row (packed_documents);
    prefix: prefix[b], L/4 + [0, L/2] (prefix_lm_lengths); padding: lengths[b], L/4 + [0,
    3L/4], at least 1 (padding). Made once per (mask, b, l): row r is the same whatever b
    (one stream, rows in order), and callers read it row by row."""
    if mask == "documents":
        random, longest = mt19937_64(7), max(1, l // 4)
        doc = np.empty((b, l), dtype=np.int32)
        for r in range(b):
            ident, end = -1, 0
            for i in range(l):
                if i == end:
                    end += 1 + random() % longest
                    ident += 1
                doc[r, i] = ident
        return doc
    if mask == "prefix":
        random = mt19937_64(11)
        return np.array([l // 4 + random() % (l // 2 + 1) for _ in range(b)], dtype=np.int32)
    random = mt19937_64(13)
    return np.array([max(1, l // 4 + random() % (l - l // 4 + 1)) for _ in range(b)],
                    dtype=np.int32)


def kept(mask, i, s, w):
    if mask == "none":
        return 0, s
    if mask == "causal":
        return 0, min(i + 1, s)
    return max(0, i - w + 1), min(i + 1, s)


def flops(c):
    name, mask, b, h, l, s, dh = c
    if mask in DATA_MASKS:
        pairs = sum(int(allowed(mask, l, s, r, b).sum()) for r in range(b))
    else:
        pairs = sum(max(0, hi - lo) for lo, hi in (kept(mask, i, s, WINDOW) for i in range(l)))
    f = 4 * b * h * dh * pairs
    if name == "mha":
        d = h * dh
        f += 4 * 2 * b * l * d * d
    return f


def allowed(mask, l, s, b=0, batch=None):
    """Boolean (L, S): True where the mask keeps the pair (query i, key j) of sequence b (of
    `batch`, b + 1 if not given: the data is made once per batch size)."""
    rows = batch or b + 1
    i = np.arange(l)[:, None]
    j = np.arange(s)[None, :]
    if mask == "none":
        return np.ones((l, s), dtype=bool)
    if mask == "causal":
        return j <= i
    if mask == "documents":
        doc = mask_data(mask, rows, l)[b]
        return (j <= i) & (doc[:, None] == doc[None, :s])
    if mask == "prefix":
        return (j <= i) | (j < mask_data(mask, rows, l)[b])
    if mask == "padding":
        return np.broadcast_to(j < mask_data(mask, rows, l)[b], (l, s))
    return (j <= i) & (i - j < WINDOW)


def np_attention(q, k, v, keep):
    """q (B, H, L, Dh), k/v (B, H, S, Dh), keep[b] the kept pairs (L, S) of sequence b: the
    definition, in f64 one head at a time."""
    out = np.empty(q.shape, dtype=np.float32)
    for b in range(q.shape[0]):
        for h in range(q.shape[1]):
            sc = (q[b, h].astype(np.float64) @ k[b, h].astype(np.float64).T)
            sc = np.where(keep[b], sc / math.sqrt(q.shape[-1]), -np.inf)
            m = sc.max(-1, keepdims=True)
            p = np.exp(sc - np.where(np.isfinite(m), m, 0))
            den = p.sum(-1, keepdims=True)
            p = np.where(den > 0, p / np.where(den > 0, den, 1), 0)
            out[b, h] = p @ v[b, h].astype(np.float64)
    return out


def make_inputs(c, rng):
    name, mask, b, h, l, s, dh = c
    u = lambda *shape: rng.uniform(-1, 1, size=shape).astype(np.float32)
    if name != "mha":
        return {"q": u(b, h, l, dh), "k": u(b, h, s, dh), "v": u(b, h, s, dh)}
    d = h * dh
    w = lambda: (u(d, d) / math.sqrt(d)).astype(np.float32)
    return {"x": u(b, l, d), "wq": w(), "wk": w(), "wv": w(), "wo": w()}


def reference(c, x):
    name, mask, b, h, l, s, dh = c
    keep = [allowed(mask, l, s, r, b) for r in range(b)]
    if name != "mha":
        return np_attention(x["q"], x["k"], x["v"], keep)
    split = lambda t: t.reshape(b, -1, h, dh).transpose(0, 2, 1, 3)
    q, k, v = (split(x["x"] @ x[w]) for w in ("wq", "wk", "wv"))
    o = np_attention(q, k, v, keep).transpose(0, 2, 1, 3).reshape(b, l, h * dh)
    return o @ x["wo"]


def time_it(fn, budget_s=10.0):
    t = time.perf_counter()
    out = fn()
    warm = time.perf_counter() - t
    runs = [warm] if warm >= 0.5 else []
    total = warm
    while True:
        n = len(runs)
        if n >= 3 and sum(runs) >= 1.0:
            break
        if n >= 1 and total + runs[-1] > budget_s:
            break
        t = time.perf_counter()
        out = fn()
        runs.append(time.perf_counter() - t)
        total += runs[-1]
    return statistics.median(runs) * 1e3, len(runs), out


# ---- peers: each returns a zero-argument function computing the case's output, or raises
# ImportError / NotImplementedError with the reason it is not available ----------------


def torch_sdpa(c, x, threads, dtype="f32"):
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(threads)
    name, mask, b, h, l, s, dh = c
    tdtype = {"f32": torch.float32, "bf16": torch.bfloat16}[dtype]
    t = {k: torch.from_numpy(v).to(tdtype) for k, v in x.items()}
    attn_mask = None
    if mask == "window" or mask in DATA_MASKS:  # (B, 1, L, S), built before the timed runs
        attn_mask = torch.from_numpy(np.stack([allowed(mask, l, s, r, b) for r in range(b)])[:, None])
    causal = mask == "causal"

    def attend(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=causal)

    if name != "mha":
        return lambda: attend(t["q"], t["k"], t["v"]).float().numpy()
    split = lambda y: y.view(b, -1, h, dh).transpose(1, 2)

    def block():
        with torch.no_grad():
            q, k, v = (split(t["x"] @ t[w]) for w in ("wq", "wk", "wv"))
            o = attend(q, k, v).transpose(1, 2).reshape(b, l, h * dh)
            return (o @ t["wo"]).float().numpy()

    return block


def torch_flex(c, x, threads, dtype="f32"):
    import torch
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    torch.set_num_threads(threads)
    name, mask, b, h, l, s, dh = c
    if name == "mha":
        raise NotImplementedError("measured for attention alone")
    data = torch.from_numpy(mask_data(mask, b, l).copy()) if mask in DATA_MASKS else None
    mods = {
        "none": None,
        "causal": lambda b_, h_, q, kv: q >= kv,
        "window": lambda b_, h_, q, kv: (q >= kv) & (q - kv < WINDOW),
        "documents": lambda b_, h_, q, kv: (q >= kv) & (data[b_, q] == data[b_, kv]),
        "prefix": lambda b_, h_, q, kv: (q >= kv) | (kv < data[b_]),
        "padding": lambda b_, h_, q, kv: kv < data[b_],
    }
    fn = torch.compile(flex_attention)
    tdtype = {"f32": torch.float32, "bf16": torch.bfloat16}[dtype]
    t = {k: torch.from_numpy(v).to(tdtype) for k, v in x.items()}
    if mask in DATA_MASKS:
        # The block mask depends on the tensor's values: built again for each call, as a
        # user whose documents or lengths change from batch to batch must, and timed with it.
        def run():
            bm = create_block_mask(mods[mask], b, None, l, s, device="cpu")
            return fn(t["q"], t["k"], t["v"], block_mask=bm).float().numpy()
    else:
        block_mask = None
        if mods[mask] is not None:
            block_mask = create_block_mask(mods[mask], None, None, l, s, device="cpu")
        run = lambda: fn(t["q"], t["k"], t["v"], block_mask=block_mask).float().numpy()
    run()  # torch.compile's first call compiles (seconds): not what is measured
    return run


def ort_mha(c, x, threads, dtype="f32"):
    if dtype != "f32":
        raise NotImplementedError("measured in f32 only (the CPU provider's MultiHeadAttention)")
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    name, mask, b, h, l, s, dh = c
    if name == "mha":
        raise NotImplementedError("measured for attention alone")
    inputs = ["query", "key", "value", "", "", "attention_bias" if mask != "none" else ""]
    while inputs and not inputs[-1]:
        inputs.pop()
    node = helper.make_node("MultiHeadAttention", inputs, ["out"], domain="com.microsoft",
                            num_heads=h)
    d = h * dh
    vi = lambda n, shape: helper.make_tensor_value_info(n, TensorProto.FLOAT, shape)
    graph_inputs = [vi("query", [b, l, d]), vi("key", [b, s, d]), vi("value", [b, s, d])]
    if mask != "none":
        graph_inputs.append(vi("attention_bias", [1, 1, l, s]))
    graph = helper.make_graph([node], "mha", graph_inputs, [vi("out", [b, l, d])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    merge = lambda t: np.ascontiguousarray(t.transpose(0, 2, 1, 3).reshape(b, -1, d))
    feeds = {"query": merge(x["q"]), "key": merge(x["k"]), "value": merge(x["v"])}
    if mask != "none":
        bias = np.where(allowed(mask, l, s), 0, -np.inf).astype(np.float32)
        feeds["attention_bias"] = bias[None, None]

    def run():
        out = sess.run(["out"], feeds)[0]
        return out.reshape(b, l, h, dh).transpose(0, 2, 1, 3)

    return run


PEERS = {"torch_sdpa": torch_sdpa, "torch_flex": torch_flex, "ort_mha": ort_mha}

GEMM_SHAPES = [(2048, 512, 2048), (4096, 384, 1536), (8192, 1536, 384), (4096, 4096, 4096),
               (640, 384, 384), (640, 384, 1536), (640, 1536, 384)]


def gemm_suite(threads, dtype, as_json, rng, shapes=GEMM_SHAPES):
    """torch.matmul at qkv bench gemm's shapes; returns True when a result is wrong."""
    import torch

    torch.set_num_threads(threads)
    tdtype = {"f32": torch.float32, "bf16": torch.bfloat16}[dtype]
    wrong = False
    for m, k, n in shapes:
        x = rng.uniform(-1, 1, size=(m, k)).astype(np.float32)
        w = (rng.uniform(-1, 1, size=(k, n)) / math.sqrt(k)).astype(np.float32)
        tx, tw = torch.from_numpy(x).to(tdtype), torch.from_numpy(w).to(tdtype)
        with torch.no_grad():
            ms, runs, got = time_it(lambda: torch.matmul(tx, tw))
        # the check: a few rows against f64 (all of a 4096^3 product would take minutes)
        rows = np.arange(0, m, max(1, m // 64))
        want = x[rows].astype(np.float64) @ w.astype(np.float64)
        err = float(np.abs(got.float().numpy()[rows] - want).max())
        ok = err <= (1e-3 if dtype == "f32" else 3e-2) * max(1.0, float(np.abs(want).max()))
        wrong |= not ok
        r = {"suite": "gemm", "peer": "torch_matmul", "dtype": dtype, "m": m, "k": k, "n": n,
             "threads": threads, "ms": ms, "runs": runs, "gflops": 2 * m * k * n / ms / 1e6,
             "max_abs_err": err, "ok": ok, "torch": torch.__version__}
        if as_json:
            print(json.dumps(r))
        else:
            print(f"torch matmul {dtype} {m}x{k}x{n} threads={threads}: {ms:9.3f} ms "
                  f"{r['gflops']:8.2f} GFLOP/s  ({runs} runs)  max_abs_err {err:.2e}"
                  f"{'' if ok else '  WRONG'}")
        sys.stdout.flush()
    return wrong


def llama_suite(threads, dtype, contexts, as_json):
    """transformers' Llama at qkv-generate --random's default size."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.set_num_threads(threads)
    torch.manual_seed(1)
    tdtype = {"f32": torch.float32, "bf16": torch.bfloat16}[dtype]
    cfg = LlamaConfig(hidden_size=512, num_hidden_layers=2, num_attention_heads=8,
                      num_key_value_heads=8, intermediate_size=1376, vocab_size=32000,
                      max_position_embeddings=max(contexts) + 64)
    model = LlamaForCausalLM(cfg).to(tdtype).eval()
    for ctx in contexts:
        ids = torch.randint(0, cfg.vocab_size, (1, ctx))
        with torch.no_grad():
            ms, runs, out = time_it(lambda: model(ids, use_cache=True, logits_to_keep=1))
            past, nxt = out.past_key_values, out.logits[:, -1:].argmax(-1)
            steps = []
            for _ in range(16):
                t = time.perf_counter()
                o = model(nxt, past_key_values=past, use_cache=True)
                steps.append(time.perf_counter() - t)
                past, nxt = o.past_key_values, o.logits[:, -1:].argmax(-1)
        step = statistics.median(steps[1:]) * 1e3
        r = {"suite": "llama", "peer": "transformers", "dtype": dtype, "context": ctx,
             "threads": threads, "prefill_ms": ms, "prefill_runs": runs,
             "prefill_tokens_per_s": ctx / ms * 1e3, "decode_step_ms": step,
             "decode_tokens_per_s": 1e3 / step}
        if as_json:
            print(json.dumps(r))
        else:
            print(f"transformers Llama {dtype} context {ctx} threads={threads}: prefill "
                  f"{ms:.1f} ms = {r['prefill_tokens_per_s']:.0f} tokens/s, decode step "
                  f"{step:.2f} ms = {r['decode_tokens_per_s']:.0f} tokens/s")
        sys.stdout.flush()


def to_bf16_values(a):
    """The values of `a` rounded to bf16 (to nearest even), as f32: what a peer given bf16
    tensors multiplies, so that the f32 reference sees the same inputs."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16 << 16
    return u.astype(np.uint32).view(np.float32)


def measure(c, threads, peers, rng, dtype="f32"):
    x = make_inputs(c, rng)
    if dtype == "bf16":
        x = {k: to_bf16_values(v) for k, v in x.items()}
    want = reference(c, x)
    # bf16: the output rounded once (2^-8), and P rounded for P.V (up to 2^-8 of max |v|).
    tol = (1e-3 if dtype == "f32" else 2 ** -7) * max(1.0, float(np.abs(want).max()))
    f = flops(c)
    rows = []
    for peer in peers:
        try:
            fn = PEERS[peer](c, x, threads, dtype)
            ms, runs, got = time_it(fn)
        except (ImportError, NotImplementedError, RuntimeError) as e:
            rows.append({"peer": peer, "unavailable": f"{type(e).__name__}: {e}"})
            continue
        err = float(np.abs(np.asarray(got, dtype=np.float64) - want).max())
        rows.append({"peer": peer, "ms": ms, "runs": runs, "gflops": f / ms / 1e6,
                     "max_abs_err": err, "ok": err <= tol})
    return {"name": c[0], "mask": c[1], "batch": c[2], "heads": c[3], "seq": c[4],
            "kv_len": c[5], "head_dim": c[6], "dtype": dtype, "threads": threads, "flops": f,
            "peers": rows}


def print_table(r):
    print(f"{r['name']} mask={r['mask']} B={r['batch']} H={r['heads']} L={r['seq']} "
          f"S={r['kv_len']} Dh={r['head_dim']} {r['dtype']} threads={r['threads']} "
          f"({r['flops'] / 1e9:.4g} GFLOP)")
    for p in r["peers"]:
        if "unavailable" in p:
            print(f"  {p['peer']:<11} unavailable ({p['unavailable']})")
        else:
            wrong = "" if p["ok"] else "  WRONG"
            print(f"  {p['peer']:<11} {p['ms']:10.3f} ms  {p['runs']:3d} runs  "
                  f"{p['gflops']:8.2f} GFLOP/s  max_abs_err {p['max_abs_err']:.2e}{wrong}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--case", help="only cases of this name (attn, attn_causal, ...)")
    ap.add_argument("--seq", type=int, help="only cases at this query length")
    ap.add_argument("--peers", default=",".join(PEERS), help="comma-separated: " +
                    ", ".join(PEERS))
    ap.add_argument("--json", action="store_true", help="one JSON object per case")
    ap.add_argument("--suite", default="attention", choices=["attention", "gemm", "llama"])
    ap.add_argument("--dtype", default="f32", choices=["f32", "bf16"],
                    help="the element type (attention: SDPA and FlexAttention on bf16 tensors, "
                         "ONNX Runtime f32 only)")
    ap.add_argument("--context", default="512,4096", help="--suite llama: prompt lengths")
    ap.add_argument("--shape", help="--suite gemm: only MxKxN (any sizes)")
    a = ap.parse_args()
    if a.threads < 1:
        ap.error("--threads must be at least 1")
    if a.suite == "gemm":
        shapes = GEMM_SHAPES
        if a.shape:
            try:
                shapes = [tuple(int(v) for v in a.shape.split("x"))]
                assert len(shapes[0]) == 3 and min(shapes[0]) > 0
            except (ValueError, AssertionError):
                ap.error(f"--shape must be MxKxN with positive sizes, got '{a.shape}'")
        return 1 if gemm_suite(a.threads, a.dtype, a.json, np.random.default_rng(1), shapes) else 0
    if a.suite == "llama":
        llama_suite(a.threads, a.dtype, [int(c) for c in a.context.split(",")], a.json)
        return 0
    peers = [p for p in a.peers.split(",") if p]
    unknown = [p for p in peers if p not in PEERS]
    if unknown:
        ap.error(f"unknown peers {unknown}; known: {', '.join(PEERS)}")
    cases = [c for c in CASES if (not a.case or c[0] == a.case) and (not a.seq or c[4] == a.seq)]
    if not cases:
        ap.error("no case matches --case/--seq")
    rng = np.random.default_rng(1)
    wrong = False
    for c in cases:
        r = measure(c, a.threads, peers, rng, a.dtype)
        wrong |= any(p.get("ok") is False for p in r["peers"])
        print(json.dumps(r) if a.json else "", end="\n" if a.json else "")
        if not a.json:
            print_table(r)
        sys.stdout.flush()
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
