#!/usr/bin/env python3
"""Writes the tiny-Llama fixtures that tests/models/llama_test.cpp compares qkv against.

Run once, by hand, with torch and transformers installed; the output is committed and the
tests never run Python or torch:

    python3 -m venv /tmp/peers && /tmp/peers/bin/pip install torch transformers
    /tmp/peers/bin/python scripts/make-llama-fixtures.py

It builds a small random LlamaForCausalLM (2 layers, GQA 4 query heads over 2 kv heads,
hidden 64, vocab 128, untied LM head), saves it with save_pretrained (config.json and
model.safetensors, float32) and writes, in tests/models/data/tiny-llama/:

- config.json, model.safetensors: the model, as Hugging Face saves it;
- prompt_ids.npy: int64 (2, P), two prompts, the second shorter (its tail is unused);
  prompt_lengths.npy: int64 (2,);
- prompt_logits.npy: float32 (2, P, V), the model's logits for each prompt on its own
  (no padding), rows past a prompt's length are 0;
- greedy_ids.npy: int64 (2, 16), model.generate(do_sample=False) for each prompt alone;
- greedy_logits.npy: float32 (2, 16, V), the logits that chose each greedy token;
- meta.json: versions, the seed, and the smallest top-1/top-2 logit gap along the greedy
  paths (a fixture whose gap is near the test tolerance would make the token check
  meaningless, so the script refuses gaps under 1e-3).

and, in tests/models/data/tiny-llama-rope/, the same weights with Llama 3's RoPE base
(rope_theta 500000, which transformers 5 saves under rope_parameters): its config.json
(saved by transformers; the weights are tiny-llama's, not written twice) and the same
prompt_*, greedy_* and meta.json files. meta.json also gives how far these logits are
from tiny-llama's (a base that changed nothing would test nothing; the script refuses a
difference under 1e-2 of the largest logit, a hundred times the tests' tolerance).

A second run writes the same weights and tokens; the logits agree with the committed ones
to about 2e-6 (PyTorch's CPU kernels do not promise the same rounding run to run), far
under the tests' tolerance.
"""
import json
import os
import sys

import numpy as np
import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "models", "data")
OUT = os.path.join(DATA, "tiny-llama")
OUT_ROPE = os.path.join(DATA, "tiny-llama-rope")
ROPE_BASE = 500000.0  # Llama 3's
NEW_TOKENS = 16
PROMPTS = [[1, 17, 42, 99, 3, 64, 8, 120, 55, 7, 31], [1, 90, 12, 77, 5]]


def logits_of(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].float().numpy()


def greedy(model, ids):
    """Greedy continuation, one token at a time, with the logits that chose each token."""
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), max_new_tokens=NEW_TOKENS, do_sample=False,
                             output_logits=True, return_dict_in_generate=True,
                             pad_token_id=0, eos_token_id=None)
    tokens = out.sequences[0, len(ids):].numpy()
    logits = torch.stack(out.logits, dim=1)[0].float().numpy()
    assert tokens.shape == (NEW_TOKENS,) and logits.shape[0] == NEW_TOKENS
    assert (logits.argmax(-1) == tokens).all()
    return tokens, logits


def min_gap(logits):
    top = np.sort(logits, axis=-1)
    return float((top[..., -1] - top[..., -2]).min())


def config_with(rope_theta):
    return LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=176,
                       num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                       max_position_embeddings=512, rms_norm_eps=1e-5, rope_theta=rope_theta,
                       tie_word_embeddings=False, bos_token_id=1, eos_token_id=2,
                       attention_bias=False, mlp_bias=False, hidden_act="silu")


def write_outputs(model, out, seed, extra=None):
    """prompt_*, greedy_* and meta.json of `model` in `out`; returns the prompt logits."""
    vocab = model.config.vocab_size
    p = max(len(x) for x in PROMPTS)
    ids = np.zeros((len(PROMPTS), p), dtype=np.int64)
    lengths = np.array([len(x) for x in PROMPTS], dtype=np.int64)
    prompt_logits = np.zeros((len(PROMPTS), p, vocab), dtype=np.float32)
    greedy_ids = np.zeros((len(PROMPTS), NEW_TOKENS), dtype=np.int64)
    greedy_logits = np.zeros((len(PROMPTS), NEW_TOKENS, vocab), dtype=np.float32)
    for b, prompt in enumerate(PROMPTS):
        ids[b, :len(prompt)] = prompt
        prompt_logits[b, :len(prompt)] = logits_of(model, prompt)
        greedy_ids[b], greedy_logits[b] = greedy(model, prompt)
    gap = min_gap(greedy_logits)
    if gap < 1e-3:
        sys.exit(f"{out}: the greedy paths have a top-2 logit gap of {gap}; pick another seed")
    np.save(os.path.join(out, "prompt_ids.npy"), ids)
    np.save(os.path.join(out, "prompt_lengths.npy"), lengths)
    np.save(os.path.join(out, "prompt_logits.npy"), prompt_logits)
    np.save(os.path.join(out, "greedy_ids.npy"), greedy_ids)
    np.save(os.path.join(out, "greedy_logits.npy"), greedy_logits)
    meta = {"seed": seed, "torch": torch.__version__, "transformers": transformers.__version__,
            "numpy": np.__version__, "min_greedy_top2_gap": gap,
            "logit_range": [float(greedy_logits.min()), float(greedy_logits.max())]}
    meta.update(extra or {})
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    print(f"wrote {out}: greedy top-2 gap >= {gap:.4f}, tokens {greedy_ids.tolist()}")
    return prompt_logits


def main():
    seed = 1234
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config_with(10000.0)).eval()
    # Random init has tiny weights (std 0.02) and nearly uniform logits; widen them so the
    # logits have clear winners and the attention is far from uniform.
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) * (1.0 / p.shape[-1]) ** 0.5)
    os.makedirs(OUT, exist_ok=True)
    model.save_pretrained(OUT, safe_serialization=True)
    base_logits = write_outputs(model, OUT, seed)

    # The same weights under another RoPE base: only config.json is written.
    rope = LlamaForCausalLM(config_with(ROPE_BASE)).eval()
    rope.load_state_dict(model.state_dict())
    assert rope.config.rope_parameters["rope_theta"] == ROPE_BASE
    os.makedirs(OUT_ROPE, exist_ok=True)
    rope.config.save_pretrained(OUT_ROPE)
    with torch.no_grad():
        moved = [float(np.abs(logits_of(rope, x) - base_logits[b, :len(x)]).max())
                 for b, x in enumerate(PROMPTS)]
    scale = float(np.abs(base_logits).max())
    if min(moved) < 1e-2 * scale:
        sys.exit(f"rope_theta {ROPE_BASE} moves the logits by only {min(moved)}")
    write_outputs(rope, OUT_ROPE, seed, {"weights": "../tiny-llama/model.safetensors",
                                         "rope_theta": ROPE_BASE,
                                         "max_diff_from_tiny_llama_logits": moved})

if __name__ == "__main__":
    main()
