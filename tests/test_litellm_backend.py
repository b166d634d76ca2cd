"""The litellm backend against a real fault-injecting OpenAI-compatible server on
127.0.0.1: retries happen, limits hold, nothing hangs, every outcome is stored
with the right status."""
from __future__ import annotations

import gzip
import logging
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fairness_tests.models.asking.runner import ask
from fairness_tests.models.backends.litellm_backend import LiteLLMBackend
from fairness_tests.models.requests.request import Decoding, Request, chat
from fairness_tests.models.store.store import ResponseStore

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fault_server import FaultServer  # noqa: E402  (tests/fault_server.py)


@pytest.fixture(scope="module")
def server():
    with FaultServer(hang_s=4.0, retry_after="1") as s:
        yield s


def req(server, text: str, kind: str = "generate", model: str = "openai/fault-model",
        **kw) -> Request:
    return Request(messages=chat("Be brief.", text), backend="litellm", model=model,
                   api_base=server.url, kind=kind,
                   choices=("a", "b", "c") if kind == "choice" else (),
                   decoding=Decoding(0.0, 1.0, 8), meta={"text": text}, **kw)


def backend(**kw) -> LiteLLMBackend:
    opts = dict(timeout_s=0.6, max_retries=3, backoff_base_s=0.05, backoff_max_s=0.2, seed=1)
    opts.update(kw)
    return LiteLLMBackend(**opts)


def test_ok_batch_chat_and_choice_parsed(server, store):
    rs = [req(server, f"ok-batch {i}", kind="choice") for i in range(5)]
    be = backend()
    out = ask(rs, be, store, progress=False)
    assert [o.status for o in out] == ["ok"] * 5
    assert all(o.text.startswith("(b) reply to: ok-batch") for o in out)
    # "(b) reply to: ..." is a letter followed by words that are not the option's text:
    # invalid under the one parser (models.requests.choice), as the BBQ metrics would count it
    assert [o.answer for o in out] == [None] * 5
    # prompt "Be brief." + "ok-batch i" = 2 + 2 words (every message counts, as OpenAI
    # counts them); reply "(b) reply to: ok-batch i" = 5 words
    assert [(o.prompt_tokens, o.completion_tokens) for o in out] == [(4, 5)] * 5
    assert be.totals().prompt_tokens == 20 and be.totals().completion_tokens == 25
    assert len(store) == 5 and store.stats()["by_status"]["ok"] == 5
    assert server.count("ok-batch") == 5


def test_text_completion_endpoint(server, store):
    r = req(server, "plain-text one", model="text-completion-openai/fault-model")
    out = ask([r], backend(), store, progress=False)
    # the default (auto) format for a completion endpoint: role-prefixed turns, the
    # assistant turn opened (an open-ended request: no answer prefix, no stop)
    assert out[0].status == "ok" and out[0].text.startswith("(b) reply to: system: Be brief.")
    hits = [h for h in server.hits if "plain-text one" in h.prompt]
    assert [h.path for h in hits] == ["/v1/completions"]
    assert hits[0].body["prompt"] == "system: Be brief.\nuser: plain-text one\nassistant: "
    assert "stop" not in hits[0].body
    # prompt_format="chat": the contents joined by a blank line, as always (key unchanged)
    legacy = ask([req(server, "plain-text two", model="text-completion-openai/fault-model")],
                 backend(prompt_format="chat"), store, progress=False)
    assert legacy[0].text.startswith("(b) reply to: Be brief.\n\nplain-text two")


def test_429_honours_retry_after(server, store):
    r = req(server, "rate-limited [[429,ok]]")
    be = backend()
    out = ask([r], be, store, progress=False)
    t = server.times("rate-limited")
    assert out[0].status == "ok" and len(t) == 2
    assert t[1] - t[0] >= 0.95                      # Retry-After: 1 (not the 0.05 s backoff)
    assert be.sleeps == [1.0]


def test_500_retried_with_exponential_backoff(server, store):
    r = req(server, "flaky [[500,500,ok]]")
    be = backend(backoff_base_s=0.1, backoff_max_s=10)
    out = ask([r], be, store, progress=False)
    assert out[0].status == "ok" and server.count("flaky") == 3
    # attempt 0: 0.1*2**0 * [0.5,1) ; attempt 1: 0.1*2**1 * [0.5,1)
    assert 0.05 <= be.sleeps[0] < 0.1 and 0.1 <= be.sleeps[1] < 0.2


def test_hang_past_timeout_is_cut_and_retried(server, store):
    be = backend(timeout_s=0.5, max_retries=1)
    t0 = time.monotonic()
    out = ask([req(server, "hang-once [[hang,ok]]"), req(server, "hang-always [[hang]]")],
              be, store, progress=False)
    elapsed = time.monotonic() - t0
    assert out[0].status == "ok" and server.count("hang-once") == 2
    assert out[1].status == "error" and "timed out" in out[1].error.lower()
    assert "gave up after 2 attempts" in out[1].error
    assert elapsed < 3.0                             # two 0.5 s timeouts + backoff, not 4 s hangs


def test_malformed_json_retried_then_error(server, store):
    out = ask([req(server, "bad-once [[badjson,ok]]"), req(server, "bad-always [[badjson]]")],
              backend(max_retries=2), store, progress=False)
    assert out[0].status == "ok" and server.count("bad-once") == 2
    assert out[1].status == "error" and server.count("bad-always") == 3


def test_empty_null_refusal_filter_and_400(server, store):
    rs = [req(server, "e1 [[empty]]", kind="choice"), req(server, "n1 [[null]]"),
          req(server, "r1 [[refusal]]"), req(server, "f1 [[filter]]"),
          req(server, "b1 [[400]]")]
    out = ask(rs, backend(max_retries=2), store, progress=False)
    assert [o.status for o in out] == ["ok", "error", "refused", "refused", "error"]
    assert out[0].text == "" and out[0].answer is None
    assert server.count("n1") == 3                    # null content is retried, then an error
    assert "can't help" in out[2].error and "content_filter" in out[3].error
    assert server.count("b1") == 1                    # a 400 is not retried
    stored = {r.meta["text"]: store.get(r.key()).status for r in rs}
    assert stored == {"e1 [[empty]]": "ok", "n1 [[null]]": "error", "r1 [[refusal]]": "refused",
                      "f1 [[filter]]": "refused", "b1 [[400]]": "error"}


def test_concurrency_limit_holds_and_is_reached():
    with FaultServer(latency_s=0.15) as slow, ResponseStore(":memory:") as st:
        rs = [req(slow, f"conc {i}") for i in range(12)]
        t0 = time.monotonic()
        out = ask(rs, backend(max_concurrency=3, timeout_s=5), st, progress=False)
        elapsed = time.monotonic() - t0
        assert all(o.status == "ok" for o in out)
        assert slow.max_inflight == 3
        assert elapsed >= 4 * 0.15                    # 12 requests / 3 at a time * 0.15 s


def test_rpm_cap_spaces_starts(server, store):
    rs = [req(server, f"rpm {i}") for i in range(8)]
    be = backend(rpm=300, max_concurrency=8)          # 300/min -> one start per 0.2 s
    t0 = time.monotonic()
    ask(rs, be, store, batch_size=4, progress=False)  # two batches: the cap spans batches
    t = sorted(server.times("rpm "))
    assert len(t) == 8
    # starts at 0, 0.2, ..., 1.4 s; the first calls of a fresh event loop may bunch up
    # at the server by the client's warm-up, so allow one extra arrival per window:
    # any 0.4 s window holds at most 2 paced starts (+1 for bunching)
    worst = max(sum(1 for x in t if a <= x < a + 0.4) for a in t)
    assert worst <= 3
    assert time.monotonic() - t0 >= 1.4               # 7 intervals of 0.2 s
    # without the cap all 8 arrive together (control):
    server_before = len(server.times("rpm-free "))
    ask([req(server, f"rpm-free {i}") for i in range(8)], backend(max_concurrency=8), store,
        progress=False)
    tf = sorted(server.times("rpm-free "))
    assert server_before == 0 and max(sum(1 for x in tf if a <= x < a + 0.4) for a in tf) > 3


def test_retry_budget_bounds_total_retries(server, store):
    rs = [req(server, f"budget {i} [[500]]") for i in range(4)]
    be = backend(max_retries=3, retry_budget=2, max_concurrency=1)
    out = ask(rs, be, store, progress=False)
    assert [o.status for o in out] == ["error"] * 4
    assert server.count("budget") == 4 + 2            # one attempt each + the 2 budgeted retries
    assert be.totals().retries == 2
    assert sum("retry budget spent" in o.error for o in out) >= 2


def test_error_rows_retried_on_rerun(server, store):
    r = req(server, "rerun-me [[500,500,ok]]")
    first = ask([r], backend(max_retries=0), store, progress=False)
    assert first[0].status == "error" and store.get(r.key()).status == "error"
    second = ask([r], backend(max_retries=1), store, progress=False)
    assert second[0].status == "ok" and store.get(r.key()).status == "ok"
    assert server.count("rerun-me") == 3


SECRET = "sk-test-TOPSECRETKEY0123456789"


def test_secrets_never_stored_exported_or_logged(server, tmp_path, caplog, capfd):
    caplog.set_level(logging.DEBUG)
    st = ResponseStore(tmp_path / "secret.sqlite")
    rs = [req(server, "leak [[echoauth]]"), req(server, "fine one"),
          req(server, "leak2 [[429,echoauth]]")]
    be = backend(api_key=SECRET, max_retries=1)
    out = ask(rs, be, st, progress=False)
    # the server saw the key (so it really was sent) ...
    assert any(h.headers.get("authorization") == f"Bearer {SECRET}" for h in server.hits)
    # ... and echoed it back in its error body, which became the error text, scrubbed
    assert out[0].status == "error" and "upstream failed" in out[0].error
    assert "Authorization: ***" in out[0].error
    assert out[1].status == "ok"
    st.export_jsonl(tmp_path / "out.jsonl")
    st.export_jsonl(tmp_path / "out.jsonl.gz")
    blobs = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    blobs["out.jsonl.gz (inflated)"] = gzip.decompress(blobs["out.jsonl.gz"])
    st.close()
    blobs.update({p.name + " (closed)": p.read_bytes() for p in tmp_path.iterdir()})
    assert any(k.startswith("secret.sqlite") for k in blobs)
    for name, data in blobs.items():
        assert SECRET.encode() not in data, name
        assert b"TOPSECRET" not in data, name
    captured = capfd.readouterr()
    logs = caplog.text + captured.out + captured.err
    assert SECRET not in logs and "TOPSECRET" not in logs
    assert SECRET not in repr(be.info())


def test_import_does_not_pull_litellm():
    code = ("import sys, fairness_tests.models.backends.litellm_backend, "
            "fairness_tests.models.asking.runner; print('litellm' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout.strip()
    assert out == "False"
