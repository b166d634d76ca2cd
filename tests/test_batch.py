"""``audit --batch`` end to end against a real loopback server that implements OpenAI's
Files and Batches endpoints (tests/batch_server.py, answering every line by the same
deterministic rule as the direct endpoints of tests/fault_server.py): every request goes
through batches, a killed run resumes without resubmitting, failed / expired / cancelled
lines, a rerun asks nothing, the replay of a batch-recorded store equals a direct run's,
and the dry run prices the batch."""
from __future__ import annotations

import importlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from fairness_tests.cli.main import main
from fairness_tests.core.exits import ExitCode
from fairness_tests.models.asking.runner import ask
from fairness_tests.models.backends.litellm_backend import LiteLLMBackend
from fairness_tests.models.batch.batch import BatchBackend, BatchPending
from fairness_tests.models.batch.batch_ledger import BatchLedger
from fairness_tests.models.requests.repeat_modes import RepeatModeUnsupported, apply_mode
from fairness_tests.models.requests.request import Decoding, Request, chat
from fairness_tests.models.store.store import ResponseStore

sys.path.insert(0, str(Path(__file__).resolve().parent))
from batch_server import BatchServer  # noqa: E402
from fault_server import FaultServer  # noqa: E402
from helpers import RAN  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MODEL = "openai/gpt-4o-mini"          # priced in litellm's local cost map, batch prices too
# one category and one item per cell: what is checked here does not depend on the count
SMALL = ("--categories", "Race_x_SES", "--limit", "1")
ITEMS = 4                             # consistency, SMALL: context x polarity
REPEATS = 5


def letters(prompt: str) -> dict[str, float]:
    return {"a": 0.5, "b": 0.3, "c": 0.15, "Unknown": 0.05}


@pytest.fixture(autouse=True)
def quiet(monkeypatch):
    monkeypatch.setenv("FAIRNESS_PROGRESS", "off")


def argv(server, tmp_path, *extra, store="s.sqlite", out="report", model=MODEL):
    return ["audit", "--live", "--backend", "litellm", "--model", model, "--api-base",
            server.url, "--store", str(tmp_path / store), "--recordings", "--benchmarks",
            "consistency", *SMALL, "--repeats", str(REPEATS), "--n-boot", "100",
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
def test_every_request_goes_through_one_batch_a_rerun_asks_nothing_and_replays_as_direct(
        tmp_path, mode, lines):
    """Every request of the run goes through one batch job, and a rerun asks nothing.
    The same deterministic server rule answers direct requests and batch lines: the
    batch store holds the same rows as a direct run's store (but latency and cost), and
    the run directories the same tables, records and verdicts; a replay of the batch
    store too. (One test per mode: the batch run is shared by both properties.)"""
    with FaultServer(answers=letters) as d:
        assert main(argv(d, tmp_path, "--repeat-mode", mode, store="d.sqlite",
                         out="direct")) in RAN
    with BatchServer(answers=letters) as s:
        rc = batch(s, tmp_path, "--repeat-mode", mode)
        assert rc in RAN
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
    # the card states it: batch mode, the job, its times, the discount, the fallbacks
    card = yaml.safe_load((tmp_path / "report" / "card" / "card.yaml").read_text())
    text = json.dumps(card)
    assert '"batch_id": "batch-0002"' in text and '"discount": "50%"' in text
    md = (tmp_path / "report" / "card" / "card.md").read_text()
    assert "batch mode: answered through 1 provider batch job(s)" in md
    assert f"submitted {info['jobs'][0]['submitted_at']}" in md and "50% off" in md
    assert "0 missing (error rows)" in md
    # the batch store replays exactly as the direct run
    assert rows(tmp_path / "d.sqlite") == rows(tmp_path / "s.sqlite")
    assert run_files(tmp_path, "direct") == run_files(tmp_path, "report")
    replay = ["audit", "--model", MODEL, "--backend", "litellm", "--store",
              str(tmp_path / "s.sqlite"), "--recordings", "--benchmarks", "consistency",
              *SMALL, "--repeats", str(REPEATS), "--n-boot", "100",
              "--repeat-mode", mode, "--out", str(tmp_path / "replay")]
    assert main(replay) in RAN
    assert run_files(tmp_path, "replay") == run_files(tmp_path, "direct")


def test_text_completion_endpoint_and_its_replay(tmp_path):
    model = "text-completion-openai/base"
    with FaultServer.llama_cpp(logits_all=True) as d:
        assert main(argv(d, tmp_path, "--repeat-mode", "logprobs", store="d.sqlite",
                         out="direct", model=model)) in RAN
    with BatchServer(base_model=True, n_support=False, null_bytes=True) as s:
        assert batch(s, tmp_path, "--repeat-mode", "logprobs", store="b.sqlite",
                     out="batch", model=model) in RAN
        assert s.batches_created == 1 and direct_hits(s) == []
        assert {h.path for h in batch_lines(s)} == {"/v1/completions"}
        assert batch_lines(s)[0].body["prompt"].endswith("Answer: (")
    assert rows(tmp_path / "d.sqlite") == rows(tmp_path / "b.sqlite")
    assert run_files(tmp_path, "direct") == run_files(tmp_path, "batch")
    assert run_meta(tmp_path, "batch")["asking"]["batch"]["endpoint"] == "/v1/completions"


# ----------------------------------------------------------------------------- the dry run

def test_dry_run_prices_the_batch_at_half_the_direct_cost(tmp_path, capsys):
    rc = main(["audit", "--dry-run", "--batch", "--model", MODEL, "--benchmarks", "consistency",
               *SMALL, "--repeats", str(REPEATS), "--store", str(tmp_path / "s.sqlite"),
               "--recordings"])
    out = capsys.readouterr().out
    assert rc == 0
    row = next(x.split() for x in out.splitlines() if x.startswith("consistency  calls*"))
    inp, outp = int(row[5]), int(row[6])
    # gpt-4o-mini: $0.15 / $0.60 per million tokens direct, $0.075 / $0.30 in a batch
    direct = inp * 0.15e-6 + outp * 0.60e-6
    half = inp * 0.075e-6 + outp * 0.30e-6
    batch_row = next(x.split() for x in out.splitlines() if x.startswith("consistency  calls ")
                     and len(x.split()) == 5)
    assert batch_row == ["consistency", "calls", str(ITEMS * REPEATS), f"{direct:.6f}",
                         f"{half:.6f}"]
    assert "completion window 24h" in out and "(50% off the direct price)" in out
    assert "local cost map (batch prices)" in out


def test_dry_run_says_when_the_batch_price_is_unknown(tmp_path, capsys):
    rc = main(["audit", "--dry-run", "--batch", "--model", "openai/some-unpriced-model",
               "--benchmarks", "consistency", *SMALL, "--repeats", "2", "--store",
               str(tmp_path / "s.sqlite"), "--recordings"])
    out = capsys.readouterr().out
    assert rc == 0 and "batch price: unknown" in out
    assert ["consistency", "calls", str(ITEMS * 2), "unknown", "unknown"] in \
        [x.split() for x in out.splitlines()]


# ----------------------------------------------------------------------------- providers

@pytest.mark.parametrize("model, words", [
    ("anthropic/claude-3-5-haiku-20241022", ["cannot create Anthropic Message Batches",
                                             "litellm_proxy/"]),
    ("gemini/gemini-1.5-flash", ["no batch API", "without --batch"])])
def test_a_provider_without_a_usable_batch_api_is_one_line_at_the_start(tmp_path, capsys,
                                                                         model, words):
    with BatchServer() as s:
        rc = main(["audit", "--live", "--batch", "--backend", "litellm", "--model", model,
                   "--store", str(tmp_path / "s.sqlite"), "--recordings", "--benchmarks",
                   "consistency", "--limit", "1", "--out", str(tmp_path / "r")])
        assert s.hits == [] and s.files_uploaded == 0
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "--batch" in err
    assert all(w in err for w in words), err


def test_batch_and_a_cost_budget_do_not_go_together(capsys):
    rc = main(["audit", "--live", "--batch", "--max-cost", "1", "--model", MODEL,
               "--out", "/nonexistent"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "--max-cost" in err and "--dry-run --batch" in err


def test_batch_needs_an_api_model(capsys):
    rc = main(["audit", "--batch", "--model", "embedded:gemma-3-270m", "--out", "/nonexistent"])
    err = capsys.readouterr().err
    assert rc == 2 and "--batch" in err and "no batch API" in err


# ----------------------------------------------------------------------------- resuming

def _wait_for_job(store: Path, timeout_s: float = 120.0) -> list[tuple]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if store.exists():
            try:
                with sqlite3.connect(store, timeout=1) as c:
                    got = c.execute("SELECT batch_id, lines FROM batch_jobs").fetchall()
                if got:
                    return got
            except sqlite3.OperationalError:
                pass
        time.sleep(0.1)
    raise AssertionError("no batch job recorded")


def test_sigkill_after_submission_then_the_same_command_resumes(tmp_path):
    """A run killed (SIGKILL) while it waits for its batch: the rerun polls the recorded
    job; exactly one batch is ever created, and nothing is asked directly."""
    with BatchServer(answers=letters) as s:
        args = argv(s, tmp_path, "--batch", "--batch-poll", "600", "--repeat-mode", "n")
        env = {**os.environ, "FAIRNESS_PROGRESS": "off", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        proc = subprocess.Popen([sys.executable, "-m", "fairness_tests", *args], cwd=ROOT,
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            jobs = _wait_for_job(tmp_path / "s.sqlite")
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        assert s.batches_created == 1 and jobs == [("batch-0002", ITEMS)]
        with ResponseStore(tmp_path / "s.sqlite") as st:
            assert len(st) == 0                   # nothing answered yet
        assert batch(s, tmp_path, "--repeat-mode", "n") in RAN
        assert s.batches_created == 1 and s.files_uploaded == 1 and direct_hits(s) == []
        assert len(batch_lines(s)) == ITEMS
    with ResponseStore(tmp_path / "s.sqlite") as st:
        assert len(st) == ITEMS * REPEATS
    info = run_meta(tmp_path)["asking"]["batch"]
    assert [(j["batch_id"], j["status"]) for j in info["jobs"]] == [("batch-0002", "completed")]


def test_batch_wait_none_exits_7_and_the_same_command_collects(tmp_path, capsys):
    with BatchServer(answers=letters) as s:
        rc = batch(s, tmp_path, "--batch-wait", "none")
        err = capsys.readouterr().err
        assert rc == ExitCode.BATCH_PENDING == 7
        assert f"1 batch job(s) with {ITEMS * REPEATS} line(s) submitted" in err
        assert "Run the same command again to collect" in err
        assert not (tmp_path / "report" / "run").exists()
        assert s.batches_created == 1 and s.hits == []
        with ResponseStore(tmp_path / "s.sqlite") as st:
            assert [j.status for j in BatchLedger(st).jobs()] == ["in_progress"]
        # the same command: the job completed meanwhile (the server's next step): collected
        assert batch(s, tmp_path, "--batch-wait", "none") in RAN
        assert s.batches_created == 1 and len(batch_lines(s)) == ITEMS * REPEATS
    with ResponseStore(tmp_path / "s.sqlite") as st:
        assert len(st) == ITEMS * REPEATS


# ----------------------------------------------------------------------------- failed lines

def _requests(n: int, tag: str = "q") -> list[Request]:
    return [Request(messages=chat(None, f"{tag} {i}: pick one"), backend="litellm",
                    model=MODEL, kind="choice", choices=("a", "b", "c"),
                    decoding=Decoding(1.0, 1.0, 16)) for i in range(n)]


def _backend(server, store, **kw) -> BatchBackend:
    return BatchBackend(LiteLLMBackend(api_base=server.url, timeout_s=5, max_retries=0), store,
                        model=MODEL, poll_s=0.01, **kw)


def _statuses(store: ResponseStore) -> list[str]:
    return [r["response"]["status"] for r in store.iter_records()]


def test_failed_lines_are_resubmitted_once(tmp_path):
    with BatchServer(answers=letters, fail={1: 2}) as s, \
            ResponseStore(tmp_path / "s.sqlite") as st:
        be = _backend(s, st)
        out = ask(_requests(6), be, st, progress=False)
        assert [r.status for r in out] == ["ok"] * 6
        assert s.batches_created == 2 and direct_hits(s) == []
        jobs = BatchLedger(st).jobs()
        assert [(j.attempt, j.lines, j.status) for j in jobs] == [(1, 6, "completed"),
                                                                  (2, 2, "completed")]
        assert be.report().resubmitted == 2 and be.report().missing == 0
        assert all(j.collected_at is not None for j in jobs)


def test_lines_failing_twice_are_error_rows_never_answers_and_a_rerun_asks_them(tmp_path):
    with BatchServer(answers=letters, fail={1: 2, 2: 2}) as s, \
            ResponseStore(tmp_path / "s.sqlite") as st:
        be = _backend(s, st)
        out = ask(_requests(5), be, st, progress=False)
        assert [r.status for r in out] == ["error", "error", "ok", "ok", "ok"]
        assert all(r.answer is None and r.text == "" for r in out[:2])
        second = BatchLedger(st).jobs()[1].batch_id
        assert out[0].error == f"batch {second} line failed (HTTP 500, server_error): " \
                               f"internal error"
        assert (be.report().resubmitted, be.report().missing) == (2, 2)
        assert s.batches_created == 2
        # a rerun asks the error rows again (a new job: the old ones are collected)
        out = ask(_requests(5), _backend(s, st), st, progress=False)
        assert [r.status for r in out] == ["ok"] * 5 and s.batches_created == 3
        assert sorted(_statuses(st)) == ["ok"] * 5


def test_failed_lines_asked_directly_with_fallback_direct(tmp_path):
    with BatchServer(answers=letters, fail={1: 3}) as s, \
            ResponseStore(tmp_path / "s.sqlite") as st:
        be = _backend(s, st, fallback="direct")
        out = ask(_requests(5), be, st, progress=False)
        assert [r.status for r in out] == ["ok"] * 5
        assert s.batches_created == 1 and len(direct_hits(s)) == 3
        assert be.report().direct == 3


def test_an_expired_batch_keeps_its_answers_and_resubmits_the_rest(tmp_path):
    with BatchServer(answers=letters, fates=["expire:2"]) as s, \
            ResponseStore(tmp_path / "s.sqlite") as st:
        be = _backend(s, st)
        out = ask(_requests(5), be, st, progress=False)
        assert [r.status for r in out] == ["ok"] * 5
        jobs = BatchLedger(st).jobs()
        assert [(j.status, j.lines) for j in jobs] == [("expired", 5), ("completed", 3)]
        assert len(batch_lines(s)) == 2 + 3


def test_a_batch_that_fails_validation_is_resubmitted_once(tmp_path):
    with BatchServer(answers=letters, fates=["fail", "fail"]) as s, \
            ResponseStore(tmp_path / "s.sqlite") as st:
        out = ask(_requests(3), _backend(s, st), st, progress=False)
        assert [r.status for r in out] == ["error"] * 3
        assert all("failed: the line was not answered" in r.error for r in out)
        assert s.batches_created == 2 and s.hits == []


def test_a_cancelled_batch_is_not_resubmitted_and_a_rerun_asks_again(tmp_path):
    with BatchServer(answers=letters, fates=["cancel"]) as s, \
            ResponseStore(tmp_path / "s.sqlite") as st:
        out = ask(_requests(3), _backend(s, st), st, progress=False)
        assert [r.status for r in out] == ["error"] * 3
        assert all("cancelled" in r.error and "not resubmitted" in r.error for r in out)
        assert s.batches_created == 1
        out = ask(_requests(3), _backend(s, st), st, progress=False)
        assert [r.status for r in out] == ["ok"] * 3 and s.batches_created == 2


def test_jobs_are_split_within_the_providers_limits(tmp_path):
    with BatchServer(answers=letters) as s, ResponseStore(tmp_path / "s.sqlite") as st:
        out = ask(_requests(7), _backend(s, st, max_lines=3), st, progress=False)
        assert [r.status for r in out] == ["ok"] * 7
        assert [j.lines for j in BatchLedger(st).jobs()] == [3, 3, 1]
        size = len(_backend(s, st)._lines(_requests(1, "r"))[0].jsonl())
        out = ask(_requests(4, "r"), _backend(s, st, max_bytes=2 * size + 10), st,
                  progress=False)
        assert [j.lines for j in BatchLedger(st).jobs()][3:] == [2, 2]


def test_the_store_records_each_job_with_its_keys(tmp_path):
    with BatchServer(answers=letters) as s, ResponseStore(tmp_path / "s.sqlite") as st:
        reqs = _requests(3)
        ask(reqs, _backend(s, st), st, progress=False)
        ledger = BatchLedger(st)
        [job] = ledger.jobs()
        assert ledger.lines(job.batch_id) == {r.key(): [r.key()] for r in reqs}
        assert job.discount == "50%" and job.endpoint == "/v1/chat/completions"
        # batch price: half of gpt-4o-mini's direct price, from the tokens the server billed
        r = st.get(reqs[0].key())
        assert r.cost_usd == pytest.approx(r.prompt_tokens * 0.075e-6
                                           + r.completion_tokens * 0.30e-6)
        assert r.latency_s is None


def test_a_repeat_mode_a_batch_line_did_not_honour_is_remembered(tmp_path):
    """A server that ignores ``n`` in batch lines: those answers are errors (never one
    choice standing for five), and the store remembers it, so the next run falls back to
    ``calls`` before submitting anything."""
    reqs = apply_mode([r.with_(repeat=k) for r in _requests(2) for k in range(3)], "n")
    with BatchServer(answers=letters, n_support=False) as s, \
            ResponseStore(tmp_path / "s.sqlite") as st:
        out = ask(reqs, _backend(s, st), st, progress=False)
        assert [r.status for r in out] == ["error"] * 6
        assert "returned 1 choice(s) for n=3" in out[0].error
        [cap] = [c for c in st.capabilities() if c.feature == "n"]
        assert cap.supported is False and "in a batch line" in cap.reason
        with pytest.raises(RepeatModeUnsupported):
            ask(reqs, _backend(s, st), st, progress=False)
        assert s.batches_created == 1


def test_a_job_cancelled_through_the_api_while_pending_is_reported_not_invented(tmp_path):
    """``--batch-wait none`` submits; someone cancels the job (POST /v1/batches/{id}/cancel,
    through litellm as a user would); the next run collects error rows naming it."""
    with BatchServer(answers=letters) as s, ResponseStore(tmp_path / "s.sqlite") as st:
        with pytest.raises(BatchPending) as pending:
            ask(_requests(3), _backend(s, st, wait="none"), st, progress=False)
        [job] = pending.value.jobs
        litellm = importlib.import_module("litellm")    # 3 s: not at collection
        cancelled = litellm.cancel_batch(batch_id=job.batch_id, custom_llm_provider="openai",
                                         api_base=s.url, api_key="sk-test")
        assert cancelled.status == "cancelling"
        out = ask(_requests(3), _backend(s, st), st, progress=False)
        assert [r.status for r in out] == ["error"] * 3
        assert out[0].error == (f"batch {job.batch_id} line failed (HTTP -, batch_cancelled): "
                                "this request was not executed: the batch cancelled "
                                "(cancelled: not resubmitted; run again to ask)")
        assert [j.status for j in BatchLedger(st).jobs()] == ["cancelled"]
        assert s.batches_created == 1 and s.hits == []
