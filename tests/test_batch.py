"""``audit --batch`` end to end against a real loopback server that implements OpenAI's
Files and Batches endpoints (tests/batch_server.py, answering every line by the same
deterministic rule as the direct endpoints of tests/fault_server.py): every request goes
through batches, a killed run resumes without resubmitting, failed / expired / cancelled
lines, a rerun asks nothing, the replay of a batch-recorded store equals a direct run's,
and the dry run prices the batch."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fairness_tests.cli.main import main
from fairness_tests.core.exits import ExitCode
from fairness_tests.models.backends.litellm_backend import LiteLLMBackend
from fairness_tests.models.batch import BatchBackend
from fairness_tests.models.batch_ledger import BatchLedger
from fairness_tests.models.request import Decoding, Request, chat
from fairness_tests.models.runner import ask
from fairness_tests.models.store import ResponseStore

sys.path.insert(0, str(Path(__file__).resolve().parent))
from batch_server import BatchServer  # noqa: E402
from fault_server import FaultServer  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MODEL = "openai/gpt-4o-mini"          # priced in litellm's local cost map, batch prices too
ITEMS = 8                             # consistency --limit 1: dataset x context x polarity
REPEATS = 5


def letters(prompt: str) -> dict[str, float]:
    return {"a": 0.5, "b": 0.3, "c": 0.15, "Unknown": 0.05}


@pytest.fixture(autouse=True)
def quiet(monkeypatch):
    monkeypatch.setenv("FAIRNESS_PROGRESS", "off")


def argv(server, tmp_path, *extra, store="s.sqlite", out="report", model=MODEL):
    return ["audit", "--live", "--backend", "litellm", "--model", model, "--api-base",
            server.url, "--store", str(tmp_path / store), "--recordings", "--protocols",
            "consistency", "--limit", "1", "--repeats", str(REPEATS), "--n-boot", "100",
            "--out", str(tmp_path / out), *extra]


def batch(server, tmp_path, *extra, **kw):
    return main(argv(server, tmp_path, "--batch", "--batch-poll", "0.01", *extra, **kw))


def direct_hits(server) -> list:
    return [h for h in server.hits if "x-batch-line" not in h.headers]


def batch_lines(server) -> list:
    return [h for h in server.hits if "x-batch-line" in h.headers]


def run_meta(tmp_path, out="report") -> dict:
    return json.loads((tmp_path / out / "run" / "run.json").read_text())


def rows(path) -> list[dict]:
    """The store's responses, sorted by key, without what differs by transport
    (latency, cost, creation time)."""
    with ResponseStore(path) as st:
        out = []
        for r in st.iter_records():
            resp = {k: v for k, v in r["response"].items() if k not in ("latency_s", "cost_usd")}
            out.append({"key": r["key"], "request": r["request"], "response": resp,
                        "fingerprint": r["fingerprint"]})
    return sorted(out, key=lambda r: r["key"])


def run_files(tmp_path, out) -> dict[str, bytes]:
    """Tables, records and verdicts of a run directory (not run.json: how it asked)."""
    run = tmp_path / out / "run"
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*"))
            if p.is_file() and p.name != "run.json"}


# ----------------------------------------------------------------------------- every mode

@pytest.mark.parametrize("mode, lines", [("calls", ITEMS * REPEATS), ("n", ITEMS),
                                         ("logprobs", ITEMS)])
def test_every_request_goes_through_one_batch_and_a_rerun_asks_nothing(tmp_path, mode, lines):
    with BatchServer(answers=letters) as s:
        rc = batch(s, tmp_path, "--repeat-mode", mode)
        assert rc in (0, 1)
        assert s.batches_created == 1 and s.files_uploaded == 1
        assert direct_hits(s) == [] and len(batch_lines(s)) == lines
        body = batch_lines(s)[0].body
        assert body["model"] == "gpt-4o-mini"          # litellm's prefix is not sent
        if mode == "n":
            assert {h.body["n"] for h in batch_lines(s)} == {REPEATS}
        if mode == "logprobs":
            assert body["logprobs"] is True and body["top_logprobs"] == 20
        # the rerun: every answer is in the store; nothing is submitted or asked
        assert batch(s, tmp_path, "--repeat-mode", mode, out="again") == rc
        assert s.batches_created == 1 and len(s.hits) == lines and s.files_uploaded == 1
    with ResponseStore(tmp_path / "s.sqlite") as st:
        assert len(st) == ITEMS * REPEATS
        assert {r["response"]["status"] for r in st.iter_records()} == {"ok"}
    info = run_meta(tmp_path)["asking"]["batch"]
    assert info["endpoint"] == "/v1/chat/completions" and info["completion_window"] == "24h"
    assert info["discount"] == "50%" and info["lines"] == lines
    assert [j["status"] for j in info["jobs"]] == ["completed"]
    assert (info["resubmitted"], info["direct"], info["missing"]) == (0, 0, 0)
    assert run_meta(tmp_path, "again")["asking"]["batch"]["jobs"] == info["jobs"]


@pytest.mark.parametrize("mode", ["calls", "n", "logprobs"])
def test_batch_store_replays_exactly_as_a_direct_run(tmp_path, mode):
    """The same deterministic server rule answers direct requests and batch lines: the
    stores hold the same rows (but latency and cost), and the run directories the same
    tables, records and verdicts; a replay of the batch store too."""
    with FaultServer(answers=letters) as d:
        assert main(argv(d, tmp_path, "--repeat-mode", mode, store="d.sqlite",
                         out="direct")) in (0, 1)
    with BatchServer(answers=letters) as s:
        assert batch(s, tmp_path, "--repeat-mode", mode, store="b.sqlite", out="batch") \
            in (0, 1)
    assert rows(tmp_path / "d.sqlite") == rows(tmp_path / "b.sqlite")
    assert run_files(tmp_path, "direct") == run_files(tmp_path, "batch")
    replay = ["audit", "--model", MODEL, "--backend", "litellm", "--store",
              str(tmp_path / "b.sqlite"), "--recordings", "--protocols", "consistency",
              "--limit", "1", "--repeats", str(REPEATS), "--n-boot", "100",
              "--repeat-mode", mode, "--out", str(tmp_path / "replay")]
    assert main(replay) in (0, 1)
    assert run_files(tmp_path, "replay") == run_files(tmp_path, "direct")


def test_text_completion_endpoint_and_its_replay(tmp_path):
    model = "text-completion-openai/base"
    with FaultServer.llama_cpp(logits_all=True) as d:
        assert main(argv(d, tmp_path, "--repeat-mode", "logprobs", store="d.sqlite",
                         out="direct", model=model)) in (0, 1)
    with BatchServer(base_model=True, n_support=False, null_bytes=True) as s:
        assert batch(s, tmp_path, "--repeat-mode", "logprobs", store="b.sqlite",
                     out="batch", model=model) in (0, 1)
        assert s.batches_created == 1 and direct_hits(s) == []
        assert {h.path for h in batch_lines(s)} == {"/v1/completions"}
        assert batch_lines(s)[0].body["prompt"].endswith("Answer: (")
    assert rows(tmp_path / "d.sqlite") == rows(tmp_path / "b.sqlite")
    assert run_files(tmp_path, "direct") == run_files(tmp_path, "batch")
    assert run_meta(tmp_path, "batch")["asking"]["batch"]["endpoint"] == "/v1/completions"
