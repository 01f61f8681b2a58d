#!/usr/bin/env python3
"""The numpy reference of examples/seed_three_matmuls.cpp, run once; its output is committed.

The second seed document, "attention is three matmuls", gives a ten-line numpy attention
(below, verbatim but for its comments, which are translated) and asks the reader to run it
on L=4, d=3 matrices. This script runs it on the sentence the seed's demo uses, "cat chases
red laser-dot" (4 tokens), with inputs X (L=4, D=4) and weights Wq, Wk, Wv stored (d=3, D=4)
as the seed stores them (it computes X @ Wq.T). The same numbers are written down in
examples/seed_three_matmuls.cpp, which checks that the files hold them.

It writes, as float64 .npy files in examples/data/three_matmuls/:
  X, Wq, Wk, Wv             the inputs
  out                       attention(X, Wq, Wk, Wv)
  out_causal                attention(X, Wq, Wk, Wv, causal=True)
  weights_causal            the causal softmax weights, to show the -1e9 cells are exactly 0
  out_strict                the seed's code with a strictly causal mask (a token may not see
                            itself), so the first token's row is masked in full

Run it from the repository root in an environment with numpy:
  python3 scripts/three_matmuls_fixture.py
"""
import os

import numpy as np


# ---- the seed's code, verbatim but for the comments -----------------------------------
def softmax(x, axis=-1):
    x = x - x.max(axis=axis, keepdims=True)   # subtract the row max (numerical first aid)
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)

def attention(X, Wq, Wk, Wv, causal=False):
    Q, K, V = X @ Wq.T, X @ Wk.T, X @ Wv.T    # (L,D)->(L,d) three personas
    S = Q @ K.T / np.sqrt(Q.shape[-1])         # (L,L) first matmul
    if causal:
        S = np.where(np.tril(np.ones_like(S)), S, -1e9)  # lower-triangular pass
    return softmax(S) @ V                     # second and third steps
# ---- end of the seed's code -----------------------------------------------------------


def causal_weights(X, Wq, Wk):
    """The seed's lines up to its softmax, returning the weights softmax(S)."""
    Q, K = X @ Wq.T, X @ Wk.T
    S = Q @ K.T / np.sqrt(Q.shape[-1])
    S = np.where(np.tril(np.ones_like(S)), S, -1e9)
    return softmax(S)


def strict_attention(X, Wq, Wk, Wv):
    """The seed's attention with np.tril(..., k=-1): token i sees only tokens j < i."""
    Q, K, V = X @ Wq.T, X @ Wk.T, X @ Wv.T
    S = Q @ K.T / np.sqrt(Q.shape[-1])
    S = np.where(np.tril(np.ones_like(S), k=-1), S, -1e9)
    return softmax(S) @ V


# Tokens: cat, chases, red, laser-dot. Features of X: noun, verb, modifier, object.
X = np.array([[1.0, 0.0, 0.0, 0.0],    # cat
              [0.0, 1.0, 0.0, 0.0],    # chases
              [0.0, 0.0, 1.0, 0.0],    # red
              [1.0, 0.0, 0.0, 1.0]])   # laser-dot
# Query features: looks for a noun, looks for a modifier, looks for a verb.
Wq = np.array([[0.0, 3.0, 1.5, 0.0],   # the verb (and the modifier) look for nouns
               [0.0, 0.0, 0.0, 3.0],   # the object looks for its modifier
               [1.5, 0.0, 0.0, 0.0]])  # nouns look for their verb
# Key features: is a noun, is a modifier, is a verb.
Wk = np.array([[2.0, 0.0, 0.0, 0.0],
               [0.0, 0.0, 2.0, 0.0],
               [0.0, 2.0, 0.0, 0.0]])
# Value features: "cat", "laser-dot", "red": what each token hands over.
Wv = np.array([[1.0, 0.0, 0.0, -1.0],
               [0.0, 0.0, 0.0, 1.0],
               [0.0, 0.0, 1.0, 0.0]])

outputs = {
    "X": X, "Wq": Wq, "Wk": Wk, "Wv": Wv,
    "out": attention(X, Wq, Wk, Wv),
    "out_causal": attention(X, Wq, Wk, Wv, causal=True),
    "weights_causal": causal_weights(X, Wq, Wk),
    "out_strict": strict_attention(X, Wq, Wk, Wv),
}
folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "data",
                      "three_matmuls")
os.makedirs(folder, exist_ok=True)
np.set_printoptions(precision=6, suppress=True)
print("numpy", np.__version__)
for name, value in outputs.items():
    np.save(os.path.join(folder, name + ".npy"), value.astype(np.float64))
    print(f"{name} {value.shape}:\n{value}")
