"""The letter distribution of a multiple-choice answer and the repeats drawn from it.

ONE implementation, used by every backend that knows the next-token scores of the
answer letters: the transformers backend (logits of its own forward pass) and the
litellm backend in ``logprobs`` repeat mode (a server's ``top_logprobs``).

With ``z_l`` the score of letter ``l`` (a logit, or a log-probability: they differ
by a constant, which the softmax removes):

- ``letter_probs = softmax(z_L / T)`` over the letters, then top-p applied to it
  (the smallest set of letters, most likely first, whose mass reaches ``top_p``,
  renormalised); ``T = 0`` gives a one-hot on the argmax;
- repeat ``r`` draws its letter by inverse CDF at the ``r``-th uniform of
  ``numpy.random.default_rng(H("choice", seed, prompt_key))``, ``H`` = the first
  8 bytes of sha256: what sampling one answer token at temperature ``T`` does,
  deterministic, independent of how requests are batched or which process asks.
"""
from __future__ import annotations

import hashlib
from typing import Any

import numpy as np


def stable_int(*parts: Any) -> int:
    """A 64-bit integer from the parts (sha256): seeds that do not depend on PYTHONHASHSEED."""
    blob = "\x1f".join(str(p) for p in parts).encode("utf-8")
    return int.from_bytes(hashlib.sha256(blob).digest()[:8], "little")


def letter_distribution(letter_logits, temperature: float, top_p: float = 1.0):
    """``softmax(z_L / T)`` over the letters (numpy), top-p applied; T = 0 -> one-hot argmax.
    A letter scored ``-inf`` (never seen) gets probability 0."""
    z = np.asarray(letter_logits, dtype=np.float64)
    if temperature <= 0:
        p = np.zeros_like(z)
        p[int(np.argmax(z))] = 1.0
        return p
    z = z / temperature
    p = np.exp(z - z.max())
    p /= p.sum()
    if top_p < 1.0:
        order = np.argsort(-p, kind="stable")
        cum = np.cumsum(p[order])
        keep = (cum - p[order]) < top_p
        q = np.zeros_like(p)
        q[order[keep]] = p[order[keep]]
        p = q / q.sum()
    return p


def draw_letter(probs, seed: int, prompt_key: str, repeat: int) -> int:
    """Repeat ``r``'s letter: inverse CDF at the r-th uniform of the stream seeded by
    ``(seed, prompt_key)``."""
    rng = np.random.default_rng(stable_int("choice", seed, prompt_key))
    u = rng.random(int(repeat) + 1)[int(repeat)]
    cdf = np.cumsum(probs)
    return int(min(np.searchsorted(cdf, u * cdf[-1], side="right"), len(probs) - 1))
