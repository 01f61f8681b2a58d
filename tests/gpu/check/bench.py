#!/usr/bin/env python3
"""The GPU check bundle's benchmark table (run.sh): qkv's attention forward and decode step
as timed on the device by qkv-gpu-check (results.json: Kernel::time_on_device, no copies),
against PyTorch's scaled_dot_product_attention at the same shapes and dtype on the same GPU
(median of CUDA-event timings), with each as a share of the GPU's peak: dense bf16 tensor
or f32 FLOP/s for the forward, HBM bandwidth for the decode step (k and v read once).

usage: bench.py [--no-torch] results.json"""
import json
import statistics
import sys

# Peaks by GPU name: dense bf16 tensor-core and f32 (non-tensor) FLOP/s, HBM bytes/s.
PEAKS = {
    "H200": (989e12, 67e12, 4.8e12),
    "H100": (989e12, 67e12, 3.35e12),
    "A100": (312e12, 19.5e12, 2.0e12),
}


def peaks(device):
    for name, p in PEAKS.items():
        if name in device:
            return p
    return None


def sdpa_ms(dims, dtype, repeat=10):
    import torch
    import torch.nn.functional as F
    t = {"bf16": torch.bfloat16, "f32": torch.float32}[dtype]
    b, l, s = dims["B"], dims["L"], dims["S"]
    q = torch.rand(b, 32, l, 128, dtype=t, device="cuda") * 2 - 1
    k = torch.rand(b, 32, s, 128, dtype=t, device="cuda") * 2 - 1
    v = torch.rand(b, 32, s, 128, dtype=t, device="cuda") * 2 - 1
    for _ in range(2):
        F.scaled_dot_product_attention(q, k, v)
    times = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        F.scaled_dot_product_attention(q, k, v)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main(argv):
    use_torch = "--no-torch" not in argv
    path = [a for a in argv if not a.startswith("--")][0]
    results = json.load(open(path))
    p = peaks(results["device"])
    print(f"attention benchmark on {results['device']} ({results['arch']}); qkv: "
          "Kernel::time_on_device (no copies), SDPA: torch CUDA events; medians")
    if p is None:
        print("  (no peak figures for this GPU: shares of peak left out)")
    for case in results["cases"]:
        for r in case.get("bench", []):
            d, ms, dtype = r["dims"], r["median_ms"], r["dtype"]
            decode = d["L"] == 1
            line = f"  {case['name']} B={d['B']} H=32 L={d['L']} S={d['S']} Dh=128: qkv {ms:.3f} ms"
            if decode:
                rate = r["bytes"] / (ms * 1e-3)
                line += f", {rate / 1e9:.0f} GB/s"
                if p:
                    line += f" ({100 * rate / p[2]:.1f}% of HBM)"
            else:
                rate = r["flops"] / (ms * 1e-3)
                line += f", {rate / 1e12:.1f} TFLOP/s"
                if p:
                    peak = p[0] if dtype == "bf16" else p[1]
                    line += f" ({100 * rate / peak:.1f}% of the {dtype} peak)"
            if use_torch:
                ref = sdpa_ms(d, dtype)
                line += f"; SDPA {ref:.3f} ms, qkv/SDPA speed {ref / ms:.2f}x"
            print(line)


if __name__ == "__main__":
    main(sys.argv[1:])
