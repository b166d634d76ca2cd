"""The live API path against servers that fail as real ones do (the loopback stand-in
of llama.cpp's server, tests/fault_server.py): failed requests stay errors and are
counted, a re-run asks only them; a capability the server rejects or ignores falls
back once, says why and is remembered in the store; a server's top-logprobs limit is
learned from its error; the small ones (unclosed sessions, unknown cost, the model in
the backend's info)."""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fairness_tests.cli.main import main
from fairness_tests.models.asking.progress import Progress
from fairness_tests.models.asking.runner import ask, ask_counted
from fairness_tests.models.backends.base import Capabilities
from fairness_tests.models.backends.litellm_backend import LiteLLMBackend
from fairness_tests.models.requests import repeat_modes as RM
from fairness_tests.models.requests.answers import AskCounts
from fairness_tests.models.requests.request import Decoding, Request, Response, chat
from fairness_tests.models.store.capabilities import CapabilityRecord, limit_in, named_feature
from fairness_tests.models.store.store import ResponseStore

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from fault_server import LLAMA_CPP_LOGPROBS_ERROR, FaultServer  # noqa: E402

L = ("a", "b", "c")
DIST = {"a": .5, "b": .3, "c": .15, "Unknown": .05}


def letters(prompt: str) -> dict[str, float]:
    return DIST


def backend(**kw) -> LiteLLMBackend:
    opts = dict(timeout_s=5, max_retries=4, backoff_base_s=0.01, backoff_max_s=0.02, seed=1)
    opts.update(kw)
    return LiteLLMBackend(**opts)


def reqs(base: str, tag: str, items: int = 2, repeats: int = 3, mode: str = "calls",
         model: str = "openai/m") -> list[Request]:
    out = [Request(messages=chat(None, f"{tag} item {i}"), backend="litellm", model=model,
                   api_base=base, kind="choice", choices=L, decoding=Decoding(1.0, 1.0, 4),
                   seed=0, repeat=k) for i in range(items) for k in range(repeats)]
    return RM.apply_mode(out, mode)


# ----------------------------------------------------------------------------- errors

def test_a_server_that_is_down_gives_errors_counted_with_the_first_message(store):
    dead = "http://127.0.0.1:9/v1"                    # discard port: connection refused
    out, counts = ask_counted(reqs(dead, "down"), backend(max_retries=1), store,
                              progress=False, label="bbq")
    assert [o.status for o in out] == ["error"] * 6
    assert isinstance(counts, AskCounts) and counts.label == "bbq"
    assert (counts.requests, counts.sent, counts.from_store, counts.failed) == (6, 6, 0, 6)
    assert "gave up after 2 attempts" in counts.first_error
    assert counts.first_error.startswith("no answer from the server: ")
    assert "Connection error" in counts.first_error
    assert not counts.complete and counts.invalid == 0
    d = counts.to_dict()
    assert d["failed"] == 6 and d["low_mass_share"] is None and d["first_error"] == \
        counts.first_error
    assert store.stats()["by_status"]["error"] == 6        # kept as errors, not answers


def test_half_down_then_a_rerun_asks_only_the_failed_requests(store):
    """Four prompts fail on their first attempt and succeed later; four always succeed
    (the stand-in scripts attempts per prompt: one repeat each)."""
    with FaultServer(answers=letters) as s:
        rs = (reqs(s.url, "flaky [[500,ok]]", items=4, repeats=1)
              + reqs(s.url, "steady", items=4, repeats=1))
        out, first = ask_counted(rs, backend(max_retries=0), store, progress=False)
        assert [o.status for o in out] == ["error"] * 4 + ["ok"] * 4
        assert (first.sent, first.from_store, first.failed) == (8, 0, 4)
        assert "500" in first.first_error
        grown = len(store)
        hits = len(s.hits)
        again, second = ask_counted(rs, backend(max_retries=0), store, progress=False)
        assert [o.status for o in again] == ["ok"] * 8
        assert len(s.hits) - hits == 4                     # only the 4 failed ones
        assert all("flaky" in h.prompt for h in s.hits[hits:])
        assert (second.sent, second.from_store, second.failed) == (4, 4, 0)
        assert len(store) == grown                         # rows replaced: no growth,
        assert second.complete                             # yet 4 requests were sent
        third = ask_counted(rs, backend(), store, progress=False)[1]
        assert (third.sent, third.from_store) == (0, 8) and len(s.hits) - hits == 4


# ----------------------------------------------------------------------------- capabilities

def test_logprobs_rejected_with_an_error_falls_back_once_and_is_remembered(store):
    """llama.cpp with logits_all=False: HTTP 500 "logprobs is not supported ...". Was:
    5 attempts per unit, error rows, no fallback."""
    with FaultServer.llama_cpp(answers=letters) as s:
        rs = reqs(s.url, "lp", items=4, repeats=5, mode="logprobs")
        with pytest.raises(RM.RepeatModeUnsupported) as info:
            ask(rs, backend(), store, progress=False)
        assert len(s.hits) == 1                           # the probe, not retried
        assert LLAMA_CPP_LOGPROBS_ERROR in str(info.value)
        assert "HTTP 500" in info.value.reason
        assert len(store) == 0                            # nothing of the mode stored
        [rec] = store.capabilities()
        assert (rec.model, rec.server, rec.feature, rec.supported) == \
            ("openai/m", s.url, "logprobs", False)
        assert LLAMA_CPP_LOGPROBS_ERROR in rec.reason
        # a re-run (a new backend, as a new process would have) falls back at once
        with pytest.raises(RM.RepeatModeUnsupported, match="remembered in the store"):
            ask(rs, backend(), store, progress=False)
        assert len(s.hits) == 1
        # the record reaches the run's metadata through the fallback note
        note = RM.record("logprobs", info.value).to_dict()
        assert note["used"] == "calls" and LLAMA_CPP_LOGPROBS_ERROR in note["fallback"]


def test_n_ignored_is_detected_once_and_not_probed_again(store):
    with FaultServer.llama_cpp(answers=letters) as s:
        rs = reqs(s.url, "nn", items=3, repeats=4, mode="n")
        with pytest.raises(RM.RepeatModeUnsupported, match=r"returned 1 choice\(s\) for n=4"):
            ask(rs, backend(), store, progress=False)
        assert len(s.hits) == 1 and s.hits[0].body["n"] == 4
        assert [(r.feature, r.supported) for r in store.capabilities()] == [("n", False)]
        with pytest.raises(RM.RepeatModeUnsupported, match="remembered"):
            ask(rs, backend(), store, progress=False)
        assert len(s.hits) == 1                           # was: probed on every run
        # the fallback (calls) answers every repeat
        out = ask(reqs(s.url, "nn", items=3, repeats=4), backend(), store, progress=False)
        assert all(o.status == "ok" for o in out) and len(s.hits) == 1 + 12
        # forgetting the server's record makes the next run probe again
        assert store.forget_capabilities(server=s.url) == 1
        with pytest.raises(RM.RepeatModeUnsupported, match="returned 1 choice"):
            ask(rs, backend(), store, progress=False)
        assert len(s.hits) == 1 + 12 + 1


def test_a_mode_honoured_is_remembered_and_shown_as_a_capability(store):
    with FaultServer(answers=letters) as s:
        be = backend(model="openai/m", api_base=s.url)
        assert be.capabilities == Capabilities(n=None, logprobs=None, batch=False,
                                               prefix_sharing=False, replay=False,
                                               remote=True, structured_output=None)
        ask(reqs(s.url, "honoured", mode="n"), be, store, progress=False)
        assert be.capabilities.n is True and be.capabilities.logprobs is None
        [rec] = store.capabilities(model="openai/m")
        assert (rec.feature, rec.supported) == ("n", True)
        fresh = backend(model="openai/m", api_base=s.url)
        ask(reqs(s.url, "honoured-2", mode="n"), fresh, store, progress=False)
        assert fresh._modes_seen == {("openai/m", s.url, "n")}


def test_logprobs_without_top_logprobs_on_llama_chat_is_no_logprobs(store):
    """llama.cpp's chat endpoint asks its model for logprobs only with top_logprobs."""
    with FaultServer.llama_cpp(answers=letters) as s:
        s.reset()
        out = ask([Request(messages=chat(None, "x"), backend="litellm", model="openai/m",
                           api_base=s.url)], backend(extra={"logprobs": True}), store,
                  progress=False)
        assert out[0].status == "ok" and len(s.hits) == 1


@pytest.mark.parametrize("flavour, words", [
    ("openai", "Expected a value <= 5, but got 20 instead"),
    ("vllm", "which is greater than max allowed: 5"),
])
@pytest.mark.parametrize("model", ["openai/m", "text-completion-openai/m"])
def test_a_top_logprobs_limit_is_learned_from_the_error(store, flavour, words, model):
    with FaultServer(answers=letters, top_logprobs_limit=5, top_logprobs_over=flavour) as s:
        be = backend()
        out = ask(reqs(s.url, "lim", items=1, repeats=3, mode="logprobs", model=model), be,
                  store, progress=False)
        asked = [h.body["top_logprobs"] if "messages" in h.body else h.body["logprobs"]
                 for h in s.hits]
        assert asked == [20, 5]                           # refused, then within the limit
        assert be.totals().retries == 0                       # not a retry
        assert all(o.status == "ok" and o.answer is not None for o in out)
        recs = {r.feature: r for r in store.capabilities()}
        assert recs["top_logprobs"].value == 5 and words in recs["top_logprobs"].reason
        # a re-run asks within the limit from the start
        ask(reqs(s.url, "lim-2", items=1, repeats=3, mode="logprobs", model=model), backend(),
            store, progress=False)
        last = s.hits[-1].body
        assert (last["top_logprobs"] if "messages" in last else last["logprobs"]) == 5


def test_a_server_that_gives_top_5_only_reports_what_it_gave(store):
    wide = {t: 1 / 10 for t in ("a", "b", "c", "d", "e", "f", "g", "h", "i", "j")}
    with FaultServer(answers=lambda p: wide, top_logprobs_limit=5) as s:
        be = backend()
        ask(reqs(s.url, "clamp", items=1, repeats=2, mode="logprobs"), be, store,
            progress=False)
    assert be.totals().top_logprobs_returned == 5 and be.totals().letter_prompts == 1


def test_server_error_words_are_read_by_feature():
    sent = {"logprobs", "top_logprobs"}
    assert named_feature(f"InternalServerError: {LLAMA_CPP_LOGPROBS_ERROR}", sent) == "logprobs"
    assert named_feature("Invalid 'top_logprobs': integer above maximum value. Expected a "
                         "value <= 20, but got 25 instead.", sent) == "top_logprobs"
    assert named_feature("Requested sample logprobs of 25, which is greater than max "
                         "allowed: 20", sent) == "top_logprobs"
    assert limit_in("which is greater than max allowed: 20") == 20
    assert limit_in("Expected a value <= 5, but got 20") == 5
    assert named_feature("Unsupported value: 'n' does not support 4 with this model.",
                         {"n"}) == "n"
    assert named_feature("'response_format' of type 'json_schema' is not supported",
                         {"structured_output"}) == "structured_output"
    assert named_feature("internal error", sent) is None
    assert named_feature(LLAMA_CPP_LOGPROBS_ERROR, {"n"}) is None   # not what was sent


def test_structured_output_rejected_is_not_retried_and_is_remembered(store):
    with FaultServer(default="400") as s:
        out = ask([Request(messages=chat(None, "so"), backend="litellm", model="openai/m",
                           api_base=s.url)],
                  backend(extra={"response_format": {"type": "json_object"}}), store,
                  progress=False)
        assert len(s.hits) == 1 and out[0].status == "error"
    # the stand-in's 400 says "unsupported thing" without naming the feature: a plain 400
    assert store.capabilities() == []


# ----------------------------------------------------------------------------- the store

def test_a_store_written_before_the_capabilities_table_opens_and_gains_it(tmp_path):
    path = tmp_path / "old.sqlite"
    old = Request(messages=chat(None, "kept"), backend="litellm", model="openai/m")
    with ResponseStore(path) as st:
        st.put(old, Response(key="", text="kept answer"))
    con = sqlite3.connect(path)
    con.execute("DROP TABLE capabilities")                 # as a store of the previous release
    con.commit()
    con.close()
    with ResponseStore(path) as st:
        assert st._execute("SELECT value FROM store_info WHERE name='schema'").fetchone()[0] \
            == "2"                                         # same version: old readers read it
        rec = CapabilityRecord("openai/m", "http://h/v1", "n", False, None, "why", 1.0)
        assert st.remember_capabilities([rec]) == 1
        assert st.capabilities() == [rec]
        assert st.get(old.key()).text == "kept answer"          # its rows as they were


def test_capability_reasons_and_servers_are_scrubbed(store):
    rec = CapabilityRecord("openai/m", "https://user:pw@host/v1", "n", False, None,
                           "failed with Authorization: Bearer abcdefgh123", 1.0)
    store.remember_capabilities([rec])
    [got] = store.capabilities()
    assert "pw@" not in got.server and "abcdefgh123" not in got.reason


# ----------------------------------------------------------------------------- small ones

UNCLOSED = textwrap.dedent("""
    import gc, sys
    sys.path.insert(0, {here!r})
    from fault_server import FaultServer
    from fairness_tests.models.backends.litellm_backend import LiteLLMBackend
    from fairness_tests.models.requests.request import Request, chat
    be = LiteLLMBackend(timeout_s=5, max_retries=0)
    with FaultServer() as s:
        for model in ("text-completion-openai/m", "openai/m"):
            for batch in range(2):
                rs = [Request(messages=chat(None, f"{{model}} {{batch}} {{i}}"),
                              backend="litellm", model=model, api_base=s.url)
                      for i in range(20)]
                assert all(o.status == "ok" for o in be.answer(rs))
    gc.collect()
    print("done")
""")


def test_a_run_prints_no_unclosed_client_session(tmp_path):
    """litellm 1.110 built an aiohttp session per text-completion request and never closed
    it: 15 'Unclosed client session' warnings for 40 requests here."""
    script = tmp_path / "run.py"
    script.write_text(UNCLOSED.format(here=str(HERE)))
    root = str(HERE.parent)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": root, "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "HOME": str(tmp_path)}
    env.update({k: v for k, v in os.environ.items() if k.startswith(("PYENV", "VIRTUAL_ENV"))})
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=180, env=env, cwd=root)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "done" in done.stdout
    assert "Unclosed" not in done.stderr, done.stderr[-2000:]


def test_unknown_cost_is_unknown_never_zero(store):
    with FaultServer(answers=letters) as s:
        be = backend()
        out = ask(reqs(s.url, "unpriced", items=1, repeats=2, model="openai/unpriced-model"),
                  be, store, progress=False)
    assert [o.cost_usd for o in out] == [None, None]
    t = be.totals()
    assert t.cost_usd is None and t.cost_unknown_calls == 2 and t.cost_known_usd == 0
    bar = Progress(4, "x", stream=None, show_tokens=True)
    bar.update(2, tokens=10, cost_unknown=2)
    assert bar.line().endswith("$?")
    bar.update(1, tokens=10, cost_usd=0.5)
    assert bar.line().endswith("$0.5000+?")
    assert backend().totals().cost_usd == 0.0          # nothing asked: nothing spent


def test_priced_model_cost_is_summed(store):
    with FaultServer(answers=letters) as s:
        be = backend()
        out = ask(reqs(s.url, "priced", items=1, repeats=2, model="openai/gpt-4o-mini"), be,
                  store, progress=False)
    assert all(o.cost_usd and o.cost_usd > 0 for o in out)
    assert be.totals().cost_usd == pytest.approx(sum(o.cost_usd for o in out))


def test_backend_info_names_the_model_asked(store):
    with FaultServer(answers=letters) as s:
        be = backend()
        assert be.info().model is None
        ask(reqs(s.url, "info", items=1, repeats=1, model="text-completion-openai/gemma-x"),
            be, store, progress=False)
        info = be.info()
    assert info.model == "text-completion-openai/gemma-x" and info.api_base == s.url
    assert info.prompt_format == "auto" and info.answer_prefix == "Answer: ("
    assert info.prompt_formats == {"text-completion-openai/gemma-x": "completion-gemma"}
    assert info.top_logprobs == 20 and info.min_letter_mass == 0.5


def test_store_capabilities_command_lists_and_forgets(tmp_path, capsys):
    path = tmp_path / "c.sqlite"
    with ResponseStore(path) as st:
        st.remember_capabilities([
            CapabilityRecord("openai/m", "http://h/v1", "logprobs", False, None,
                             "HTTP 500: logprobs is not supported", 1.0),
            CapabilityRecord("openai/m", "http://h/v1", "top_logprobs", None, 5, "", 1.0)])
    assert main(["store", "capabilities", "--store", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["openai/m at http://h/v1: logprobs not supported - HTTP 500: logprobs is "
                   "not supported", "openai/m at http://h/v1: top_logprobs limit 5"]
    assert main(["store", "capabilities", "--store", str(path), "--forget"]) == 0
    assert "forgot 2 capability record(s)" in capsys.readouterr().out
    with ResponseStore(path) as st:
        assert st.capabilities() == []
