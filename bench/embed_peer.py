#!/usr/bin/env python3
"""Times sentence-transformers (PyTorch, CPU) on the sentences `qkv embed --bench` times.

    HF_HUB_OFFLINE=1 python3 bench/embed_peer.py [--model DIR] [--threads 2] [--repeat 3]
                                                 [--sentences N --words W --batch B] [--json]
                                                 [--dtype f32|bf16]

The cases are those of `qkv embed --bench`: 256 sentences of 18 words (20 tokens) at batch
32, and 256 sentences of 300 words (truncated to 256 tokens) at batch 16; sentence i is
word (31 i + 17 k) mod 64 of the same 64-word list, k = 0..W-1 (tools/qkv/embed.cpp,
bench_sentence). Each case runs model.encode() once untimed, then --repeat times; the
median is reported, as qkv does. Run by hand from a virtual environment with torch and
sentence-transformers (python3 -m venv /tmp/st && /tmp/st/bin/pip install torch
sentence-transformers); the tests never run it.
"""
import argparse
import json
import os
import statistics
import sys
import time

WORDS = [
    "the", "of", "and", "to", "in", "is", "was", "for", "on", "that",
    "with", "as", "by", "at", "from", "his", "her", "an", "which", "or",
    "are", "be", "this", "had", "not", "but", "new", "first", "one", "their",
    "after", "also", "two", "time", "were", "city", "world", "school", "state", "team",
    "people", "music", "year", "film", "war", "house", "game", "water", "life", "family",
    "book", "road", "night", "light", "river", "small", "great", "long", "train", "paper",
    "north", "south", "king", "power"]


def sentence(i, words):
    return " ".join(WORDS[(31 * i + 17 * k) % 64] for k in range(words))


def main():
    cache = os.environ.get("QKV_MODEL_CACHE", os.path.expanduser("~/.cache/qkv/models"))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=os.path.join(cache, "all-MiniLM-L6-v2"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--sentences", type=int)
    p.add_argument("--words", type=int)
    p.add_argument("--batch", type=int)
    p.add_argument("--json", action="store_true")
    p.add_argument("--dtype", default="f32", choices=["f32", "bf16"],
                   help="bf16: the model cast to torch.bfloat16 (as qkv embed --dtype bf16)")
    a = p.parse_args()

    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(a.threads)
    model = SentenceTransformer(a.model, device="cpu")
    if a.dtype == "bf16":
        model = model.to(torch.bfloat16)
    cases = [(256, 18, 32), (256, 300, 16)]
    if a.sentences or a.words or a.batch:
        cases = [(a.sentences or 256, a.words or 18, a.batch or 32)]
    out = {"peer": "sentence-transformers", "torch": torch.__version__, "threads": a.threads,
           "dtype": a.dtype, "cases": []}
    for n, words, batch in cases:
        s = [sentence(i, words) for i in range(n)]
        tokens = max(len(t) for t in model.tokenizer(s[:8], truncation=True,
                                                     max_length=model.max_seq_length)["input_ids"])
        model.encode(s, batch_size=batch)  # warm-up
        ms = []
        for _ in range(a.repeat):
            t = time.perf_counter()
            model.encode(s, batch_size=batch)
            ms.append(1e3 * (time.perf_counter() - t))
        med = statistics.median(ms)
        out["cases"].append({"sentences": n, "words": words, "batch": batch,
                             "tokens_per_sentence": tokens, "ms": med, "runs": len(ms),
                             "sentences_per_s": n / (med / 1e3)})
        if not a.json:
            print(f"{n} sentences of {tokens} tokens, batch {batch}: "
                  f"{n / (med / 1e3):.1f} sentences/s ({med:.0f} ms, median of {len(ms)})")
    if a.json:
        json.dump(out, sys.stdout, indent=2)
        print()


if __name__ == "__main__":
    main()
