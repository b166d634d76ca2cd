"""API-model runs end to end against the loopback OpenAI-compatible server: repeat
modes through `fairness-tests audit` (with the fallback recorded), reasoning
settings and truncated answers, the dry run against the counted truth, and the
--max-cost budget (exit code 4, a re-run resumes)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

from fairness_tests.cli.main import main
from fairness_tests.models.asking.runner import ask
from fairness_tests.models.backends.cost import EXIT_BUDGET, BudgetReached
from fairness_tests.models.backends.litellm_backend import LiteLLMBackend
from fairness_tests.models.requests.request import Decoding, Request, chat
from fairness_tests.models.store.store import ResponseStore

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fault_server import FaultServer, tiktoken_counter  # noqa: E402
from helpers import RAN  # noqa: E402

MODEL = "openai/gpt-4o-mini"         # in litellm's local cost map: priced, cl100k counter
# one category, one item per context x polarity cell (what is checked here does not
# depend on the count): 4 consistency items x 5 repeats
SMALL = ("--categories", "Race_x_SES", "--limit", "1")
ITEMS, REPEATS = 4, 5
N = ITEMS * REPEATS


def letters(prompt: str) -> dict[str, float]:
    return {"a": 0.5, "b": 0.3, "c": 0.15, "Unknown": 0.05}


def openai_tokens(text: str) -> int:
    """gpt-4o-mini's own tokenizer, o200k_base, through tiktoken (not litellm's counter)."""
    global _COUNT
    if _COUNT is None:
        _COUNT = tiktoken_counter("o200k_base")
    return _COUNT(text)


_COUNT = None


@pytest.fixture(autouse=True)
def quiet(monkeypatch):
    monkeypatch.setenv("FAIRNESS_PROGRESS", "off")


def audit(server, tmp_path, *extra, store="s.sqlite", out="report", model=MODEL):
    return main(["audit", "--live", "--backend", "litellm", "--model", model,
                 "--api-base", server.url, "--store", str(tmp_path / store), "--recordings",
                 "--benchmarks", "consistency", *SMALL, "--repeats", str(REPEATS),
                 "--n-boot", "100", "--out", str(tmp_path / out), *extra])


def run_meta(tmp_path, out="report") -> dict:
    return json.loads((tmp_path / out / "run" / "run.json").read_text())


# ----------------------------------------------------------------------------- modes via the CLI

@pytest.mark.parametrize("mode, calls", [("calls", N), ("n", ITEMS), ("logprobs", ITEMS)])
def test_audit_repeat_modes_request_counts_and_metadata(tmp_path, mode, calls):
    """4 consistency items (1 per context x polarity cell of one dataset) x 5 repeats."""
    with FaultServer(answers=letters) as s:
        rc = audit(s, tmp_path, "--repeat-mode", mode)
        assert rc in RAN
        assert len(s.hits) == calls
        if mode == "n":
            assert {h.body["n"] for h in s.hits} == {REPEATS}
    meta = run_meta(tmp_path)
    rec = meta["asking"]["repeat_mode"]
    assert rec["requested"] == rec["used"] == mode and rec["fallback"] is None
    assert rec["shared_forward_pass"] == (mode != "calls")
    assert meta["asking"]["usage"]["calls"] == calls
    with ResponseStore(tmp_path / "s.sqlite") as st:
        assert len(st) == N
    # the consistency table was computed from the N answers
    per_item = pd.read_csv(tmp_path / "report" / "run" / "tables" / "consistency_items.csv")
    assert len(per_item) == ITEMS


@pytest.mark.parametrize("mode, switch", [("n", "n_support"), ("logprobs", "logprobs_support")])
def test_audit_falls_back_to_calls_and_says_so(tmp_path, capfd, mode, switch):
    with FaultServer(answers=letters, **{switch: False}) as s:
        rc = audit(s, tmp_path, "--repeat-mode", mode)
        assert rc in RAN
        assert len(s.hits) == 1 + N                  # the detecting request, then N calls
    rec = run_meta(tmp_path)["asking"]["repeat_mode"]
    assert rec["requested"] == mode and rec["used"] == "calls" and not rec["shared_forward_pass"]
    assert "openai (openai/gpt-4o-mini at http://127.0.0.1:" in rec["fallback"]
    assert "asking with --repeat-mode calls instead" in capfd.readouterr().err
    with ResponseStore(tmp_path / "s.sqlite") as st:
        rows = list(st.iter_records())
    assert len(rows) == N and all("repeat_mode" not in r["request"] for r in rows)


# ----------------------------------------------------------------------------- reasoning

def test_reasoning_effort_reaches_the_server_and_the_key(tmp_path):
    with FaultServer(answers=letters, reasoning={None: 0, "low": 3, "high": 50}) as s, \
            ResponseStore(tmp_path / "r.sqlite") as st:
        def req(effort, budget=None):
            return Request(messages=chat(None, "pick one"), backend="litellm",
                           model="hosted_vllm/reasoner", api_base=s.url, kind="choice",
                           choices=("a", "b", "c"),
                           decoding=Decoding(1.0, 1.0, 20, reasoning_effort=effort,
                                             thinking_budget=budget))
        be = LiteLLMBackend(timeout_s=5, max_retries=0)
        low, high = ask([req("low"), req("high")], be, st, progress=False)
        bodies = [h.body for h in s.hits]
        assert sorted(b.get("reasoning_effort") for b in bodies) == ["high", "low"]  # concurrent
        assert req("low").key() != req("high").key() != req(None).key()
        # low: 3 reasoning tokens + the 1-token answer
        assert (low.status, low.reasoning_tokens, low.completion_tokens) == ("ok", 3, 4)
        # high: 50 > max_tokens 20: empty content, finish_reason length -> truncated
        assert (high.status, high.text, high.finish_reason) == ("truncated", "", "length")
        assert "went to reasoning (20 of the reply's 20 completion tokens were reasoning; " \
            "max_tokens 20)" in high.error and "--max-tokens" in high.error
        assert be.totals().reasoning_tokens == 3 + 20 and be.totals().truncated == 1
        assert st.get(req("high").key()).status == "truncated"
        # truncated is not an error: a re-run does not ask it again
        ask([req("high")], be, st, progress=False)
        assert len(s.hits) == 2
        # a thinking budget goes through litellm (which maps it for the provider)
        ask([req(None, budget=8)], be, st, progress=False)
        assert s.hits[-1].body.get("reasoning_effort") or s.hits[-1].body.get("thinking")


def test_reasoning_effort_litellm_would_drop_is_a_config_error(tmp_path):
    with FaultServer(answers=letters) as s:
        rc = audit(s, tmp_path, "--reasoning-effort", "low")    # gpt-4o-mini: not a reasoner
        assert rc == 2 and s.hits == []


def test_truncated_answers_are_counted_and_the_setting_named(tmp_path, capfd):
    with FaultServer(answers=letters, reasoning={None: 0, "high": 30}) as s:
        rc = audit(s, tmp_path, "--reasoning-effort", "high", "--max-tokens", "16",
                   model="hosted_vllm/reasoner")
        assert rc in RAN and len(s.hits) == N
    err = capfd.readouterr().err
    # a consistency-only run names its own protocol (it said "bbq" before)
    assert f"{N} of {N} consistency answers were truncated" in err
    assert "--max-tokens (now 16)" in err
    meta = run_meta(tmp_path)
    assert meta["bbq"]["truncated_answers"] == N and meta["bbq"]["max_tokens"] == 16
    assert meta["asking"]["usage"]["reasoning_tokens"] == N * 16
    # with room for the answer none is truncated (a new request: max_tokens is in the key)
    with FaultServer(answers=letters, reasoning={None: 0, "high": 30}) as s:
        assert audit(s, tmp_path, "--reasoning-effort", "high", "--max-tokens", "64",
                     model="hosted_vllm/reasoner", out="r2") in RAN
        assert len(s.hits) == N
    assert run_meta(tmp_path, "r2")["bbq"]["truncated_answers"] == 0


def test_api_only_options_with_a_local_backend_are_refused(tmp_path):
    rc = main(["audit", "--backend", "transformers", "--repeat-mode", "n",
               "--store", str(tmp_path / "x.sqlite"), "--recordings", "--out", str(tmp_path)])
    assert rc == 2


# ----------------------------------------------------------------------------- dry run

def test_dry_run_counts_match_what_the_server_then_counts(tmp_path, capsys):
    """The dry run's calls and input tokens equal the server's own count of a live run,
    for every repeat mode; its output tokens bound the billed ones. The server counts
    tokens the way OpenAI does (3 per message + role + content, 3 to prime)."""
    common = ["--backend", "litellm", "--model", MODEL, "--benchmarks", "consistency",
              *SMALL, "--repeats", str(REPEATS), "--recordings", "--n-boot", "100"]
    for mode in ("calls", "n", "logprobs"):
        store = tmp_path / f"{mode}.sqlite"
        with FaultServer(answers=letters, tokenizer=openai_tokens, chat_overhead=True) as s:
            assert main(["audit", "--dry-run", *common, "--api-base", s.url, "--store",
                         str(store), "--repeat-mode", mode]) == 0
            text = capsys.readouterr().out
            assert s.hits == []                               # the dry run asked nothing
            row = next(line.split() for line in text.splitlines()
                       if line.startswith("consistency") and f"{mode}*" in line)
            responses, in_store, calls, inp, out = map(int, row[2:7])
            assert (responses, in_store) == (N, 0)
            assert main(["audit", "--live", *common, "--api-base", s.url, "--store", str(store),
                         "--repeat-mode", mode, "--out", str(tmp_path / mode)]) in RAN
            assert calls == len(s.hits) and inp == s.prompt_tokens
            assert s.completion_tokens <= out
            # afterwards the store holds everything: nothing left to ask
            assert main(["audit", "--dry-run", *common, "--api-base", s.url, "--store",
                         str(store), "--repeat-mode", mode]) == 0
            row = next(line.split() for line in capsys.readouterr().out.splitlines()
                       if line.startswith("consistency") and f"{mode}*" in line)
            assert list(map(int, row[2:7])) == [N, N, 0, 0, 0]
    assert "litellm token_counter (tiktoken o200k_base)" in text
    assert "local cost map (gpt-4o-mini)" in text


# ----------------------------------------------------------------------------- budget

def test_max_cost_stops_cleanly_and_a_rerun_resumes(tmp_path, capfd):
    # gpt-4o-mini: $0.15 / $0.60 per million tokens; one call here costs ~8e-6 $: the
    # budget stops the run about half way through its N calls
    with FaultServer(answers=letters, tokenizer=openai_tokens, chat_overhead=True) as s:
        common = ["--max-cost", "0.00008"]
        rc = audit(s, tmp_path, *common, "--batch-size", "1")
        err = capfd.readouterr().err
        assert rc == EXIT_BUDGET
        first = len(s.hits)
        assert 0 < first < N
        assert "budget reached" in err and "are kept" in err
        with ResponseStore(tmp_path / "s.sqlite") as st:
            kept = len(st)
            spent = sum(r["response"]["cost_usd"] for r in st.iter_records())
            assert st._execute("SELECT COUNT(*) FROM leases").fetchone()[0] == 0
        assert kept == first                        # every answered request was recorded
        assert spent >= 0.00008
        assert not (tmp_path / "report" / "run").exists()
        # a re-run with room to finish asks only what is missing
        rc = audit(s, tmp_path, "--max-cost", "1")
        assert rc in RAN
        assert len(s.hits) == N and len({h.prompt + str(h.body.get("seed")) for h in s.hits}) == N


def test_budget_reached_is_raised_by_the_backend_with_requests_not_started(tmp_path):
    with FaultServer(answers=letters) as s, ResponseStore(tmp_path / "b.sqlite") as st:
        reqs = [Request(messages=chat(None, f"budget {i}"), backend="litellm", model=MODEL,
                        api_base=s.url, decoding=Decoding(1.0, 1.0, 4)) for i in range(10)]
        be = LiteLLMBackend(timeout_s=5, max_concurrency=1, max_cost_usd=1e-9)
        with pytest.raises(BudgetReached) as info:
            ask(reqs, be, st, progress=False)
        assert len(s.hits) == 1 and len(st) == 1 and info.value.not_asked == 9


def test_max_cost_needs_a_price(tmp_path):
    with FaultServer(answers=letters) as s:
        rc = audit(s, tmp_path, "--max-cost", "1", model="openai/unpriced-model")
        assert rc == 2 and s.hits == []
