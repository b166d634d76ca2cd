"""runner.ask: store first, misses claimed and asked once, replay misses explained."""
from __future__ import annotations

import io
import sys
import threading
import time
import types
from functools import partial

import pytest
from helpers import req as make_req

from fairness_tests.core.errors import FairnessTestsError, MissingResponsesError
from fairness_tests.models.asking.progress import Progress
from fairness_tests.models.asking.runner import ask
from fairness_tests.models.backends.replay import ReplayBackend
from fairness_tests.models.requests.answers import default_parse_choice
from fairness_tests.models.requests.request import Response
from fairness_tests.models.store import replaying
from fairness_tests.models.store.store import ResponseStore

req = partial(make_req, text="q{i}")        # "q<i>": what EchoBackend answers from


class EchoBackend:
    """A backend whose answer is computable from the prompt: q<i> -> "(<'abc'[i%3]>)".
    Records every request it is given; can fail on chosen items."""
    name = "echo"

    def __init__(self, fail: set[int] = frozenset(), stop_after: int | None = None):
        self.calls: list[str] = []
        self.batches: list[int] = []
        self.fail = fail
        self.stop_after = stop_after

    def answer(self, requests, on_response=None):
        self.batches.append(len(requests))
        out = []
        for r in requests:
            if self.stop_after is not None and len(self.calls) >= self.stop_after:
                raise KeyboardInterrupt("simulated interruption")
            self.calls.append(r.key())
            i = int(r.messages[-1].content[1:])
            resp = (Response(key=r.key(), status="error", error="boom") if i in self.fail
                    else Response(key=r.key(), text=f"({'abc'[i % 3]})", prompt_tokens=3,
                                  completion_tokens=2))
            if on_response:
                on_response(r, resp)
            out.append(resp)
        return out

    def info(self):
        return {"backend": "echo"}

    def fingerprint(self):
        return {"backend": "echo"}


def test_ask_stores_then_serves_from_store(store):
    rs = [req(i) for i in range(10)]
    be = EchoBackend()
    out = ask(rs, be, store, batch_size=4, progress=False)
    assert [o.answer for o in out] == [i % 3 for i in range(10)]   # parsed "(a)/(b)/(c)"
    assert be.batches == [4, 4, 2]
    assert len(store) == 10
    again = EchoBackend()
    out2 = ask(rs, again, store, progress=False)
    assert again.calls == []                                        # zero model calls
    assert [o.text for o in out2] == [o.text for o in out]


def test_duplicates_asked_once_and_returned_in_order(store):
    rs = [req(1), req(2), req(1), req(2), req(3)]
    be = EchoBackend()
    out = ask(rs, be, store, progress=False)
    assert len(be.calls) == 3
    assert [o.answer for o in out] == [1, 2, 1, 2, 0]


def test_only_missing_keys_are_asked(store):
    rs = [req(i) for i in range(8)]
    ask(rs[:5], EchoBackend(), store, progress=False)
    be = EchoBackend()
    ask(rs, be, store, progress=False)
    assert sorted(be.calls) == sorted(r.key() for r in rs[5:])


def test_interrupted_run_keeps_what_completed(store):
    rs = [req(i) for i in range(10)]
    with pytest.raises(KeyboardInterrupt):
        ask(rs, EchoBackend(stop_after=6), store, progress=False)
    assert len(store) == 6
    assert store.stats()["live_leases"] == 0          # leases released on the way out
    be = EchoBackend()
    ask(rs, be, store, progress=False)
    assert len(be.calls) == 4


def test_error_rows_are_retried_refusals_kept(store):
    rs = [req(i) for i in range(4)]
    ask(rs, EchoBackend(fail={1}), store, progress=False)
    assert store.get(rs[1].key()).status == "error"
    store.put(rs[2], Response(key="", status="refused", error="content filter"))
    be = EchoBackend()
    out = ask(rs, be, store, progress=False)
    assert be.calls == [rs[1].key()]
    assert [o.status for o in out] == ["ok", "ok", "refused", "ok"]
    be2 = EchoBackend(fail={1})
    ask(rs, be2, store, progress=False, retry_errors=False)
    assert be2.calls == []


def test_parse_choice_is_pluggable(store):
    rs = [req(i) for i in range(3)]
    seen = []

    def always_c(r, text):
        seen.append(text)
        return 2
    out = ask(rs, EchoBackend(), store, parse_choice=always_c, progress=False)
    assert [o.answer for o in out] == [2, 2, 2] and len(seen) == 3
    # an out-of-range index from a parser is treated as invalid
    out = replaying.replay(rs, store, parse_choice=lambda r, t: 7)
    assert [o.answer for o in out] == [2, 2, 2]       # stored answers are kept
    gen = req(5, kind="generate")
    assert ask([gen], EchoBackend(), store, progress=False)[0].answer is None


def test_parse_choice_named_in_meta(store, monkeypatch):
    mod = types.ModuleType("fairness_test_parsers")
    mod.always_c = lambda request, text: 2
    monkeypatch.setitem(sys.modules, "fairness_test_parsers", mod)
    r = req(1).with_(meta={"parse_choice": "fairness_test_parsers:always_c"})
    out = ask([r], EchoBackend(), store, progress=False)
    # text "(b)": the default parser gives 1, so 2 shows the named parser was used
    assert out[0].answer == 2


@pytest.mark.parametrize("text,expected", [
    ("(b)", 1), ("B.", 1), ("Answer: c", 2), ("  (a)", 0),
    # the one parser (models.requests.choice): no option text shown -> a letter plus words is
    # invalid, as the BBQ protocol's parse_answer says (issue 10, defect 11)
    ("b) the man", None), ("I think (c) is right", None), ("(a) or (b)", None),
    ("", None), ("none", None), ("it is unclear", None),
])
def test_default_parse_choice(text, expected):
    assert default_parse_choice(req(0), text) == expected


def test_replay_miss_names_count_first_keys_meta_and_command(store):
    rs = [req(i) for i in range(9)]
    ask(rs[:2], EchoBackend(), store, progress=False)
    with pytest.raises(MissingResponsesError) as ei:
        ask(rs, ReplayBackend(store=store), store)
    msg = str(ei.value)
    assert msg.startswith("7 of 9 requests have no recorded response")
    assert rs[2].key()[:16] in msg and "item=2" in msg
    assert rs[8].key()[:16] not in msg                 # only the first few are listed
    assert "--live --model" in msg and "--backend litellm" in msg and str(store.path) in msg
    assert ei.value.missing_count == 7
    # complete: replay serves everything, via ask or the backend itself
    ask(rs, EchoBackend(), store, progress=False)
    assert [o.answer for o in ReplayBackend(store=store).answer(rs)] == [i % 3 for i in range(9)]


def test_other_owners_lease_is_waited_for_not_asked(tmp_path):
    path = tmp_path / "s.sqlite"
    holder = ResponseStore(path)
    mine = ResponseStore(path)
    rs = [req(i) for i in range(4)]
    assert holder.claim([rs[0].key()]) == [rs[0].key()]

    def finish_later():
        time.sleep(0.3)
        holder.put(rs[0], Response(key="", text="(a)"))
    t = threading.Thread(target=finish_later)
    t.start()
    be = EchoBackend()
    out = ask(rs, be, mine, progress=False, poll_s=0.02, wait_timeout_s=60)
    t.join(timeout=30)
    assert not t.is_alive(), "the lease holder's thread (finish_later) did not end in 30 s"
    assert rs[0].key() not in be.calls and len(be.calls) == 3
    assert out[0].text == "(a)"
    holder.close()
    mine.close()


def test_wait_for_others_is_bounded(tmp_path):
    path = tmp_path / "s.sqlite"
    holder, mine = ResponseStore(path), ResponseStore(path)
    holder.claim([req(0).key()])
    with pytest.raises(FairnessTestsError, match="timed out after 0.3s waiting for 1"):
        ask([req(0)], EchoBackend(), mine, progress=False, wait_timeout_s=0.3, poll_s=0.02)
    holder.close()
    mine.close()


def test_progress_lines_under_capture(store, monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)   # no "[gwN] " prefix here
    buf = io.StringIO()
    bar = Progress(20, "echo:m", stream=buf, every_pct=25, interval_s=1e9)
    ask([req(i) for i in range(20)], EchoBackend(), store, progress=bar)
    bar.close()
    lines = buf.getvalue().splitlines()
    assert all("\r" not in ln for ln in lines)
    assert 4 <= len(lines) <= 6                          # ~every 25 % plus the final line
    assert lines[-1].startswith("echo:m  20/20  100%") and "tok 100" in lines[-1]


class BatchedBackend(EchoBackend):
    """Reports like the transformers backend: a load phase, ``begin``, then responses in
    batches of ``size`` closed by ``batch_done``; can fail inside a batch."""
    name = "batched"

    def __init__(self, size: int, fail_after: int | None = None):
        super().__init__()
        self.size, self.fail_after = size, fail_after

    def answer(self, requests, on_response=None):
        on_response.phase("loading model x ...")
        on_response.begin(10 * len(requests), "tok", "model ready")
        out = []
        for start in range(0, len(requests), self.size):
            for r in requests[start:start + self.size]:
                if self.fail_after is not None and len(out) == self.fail_after:
                    raise RuntimeError("device lost")
                i = int(r.messages[-1].content[1:])
                resp = Response(key=r.key(), text=f"({'abc'[i % 3]})")
                on_response(r, resp)
                out.append(resp)
            on_response.batch_done(10 * len(requests[start:start + self.size]))
        return out


def test_batched_backend_commits_once_per_batch(store, monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)     # no "[gw1] " prefix
    commits = []
    real = store.put_many
    monkeypatch.setattr(store, "put_many", lambda pairs, **kw: commits.append(len(pairs))
                        or real(pairs, **kw))
    monkeypatch.setattr(store, "put", lambda *a, **k: pytest.fail("per-response commit"))
    buf = io.StringIO()
    bar = Progress(10, "b", stream=buf, every_pct=1, interval_s=1e9)
    out = ask([req(i) for i in range(10)], BatchedBackend(size=4), store, progress=bar)
    assert [o.answer for o in out] == [i % 3 for i in range(10)]
    assert commits == [4, 4, 2] and len(store) == 10       # one transaction per batch
    lines = buf.getvalue().splitlines()
    assert lines[0] == "b  loading model x ..." and lines[1] == "b  model ready"
    # a line per batch, the share of the work done moving with it
    assert [ln.split("  ")[1:3] for ln in lines[2:]] == [["4/10", " 40%"], ["8/10", " 80%"],
                                                       ["10/10", "100%"]]
    assert "computed 100/100 tok" in lines[-1]


def test_a_fault_inside_a_batch_keeps_what_was_reported(store):
    rs = [req(i) for i in range(10)]
    with pytest.raises(RuntimeError, match="device lost"):
        ask(rs, BatchedBackend(size=4, fail_after=6), store, progress=False)
    # batch 1 (4) was closed; 2 of batch 2 were reported before the fault: all 6 kept
    assert len(store) == 6
    assert store.leased_by_others([r.key() for r in rs]) == set()
    again = EchoBackend()
    ask(rs, again, store, progress=False)
    assert len(again.calls) == 4                            # only the missing ones asked


def test_the_whole_list_goes_to_the_backend_at_once(store):
    """Issue 13: misses went to the backend 256 at a time, so it could neither sort nor
    share prefixes across the list; now one call gets every claimed miss."""
    be = EchoBackend()
    ask([req(i) for i in range(600)], be, store, progress=False)
    assert be.batches == [600]
