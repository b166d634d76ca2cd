"""The progress bar: whole lines off a TTY, worker prefix under xdist, rate/ETA/tokens."""
from __future__ import annotations

import io

from fairness_tests.models.asking.progress import Progress
from fairness_tests.models.asking.runner import ask
from fairness_tests.models.requests.request import Request, Response, chat
from fairness_tests.models.store.store import ResponseStore


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


class FakeTTY(io.StringIO):
    def isatty(self):
        return True


def test_lines_every_pct_with_rate_eta_and_worker_prefix(monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw3")
    buf, clock = io.StringIO(), Clock()
    bar = Progress(100, "bbq litellm:m", stream=buf, every_pct=25, interval_s=1e9, clock=clock)
    for _ in range(50):
        clock.t += 0.1
        bar.update(1, tokens=10, cost_usd=0.001)
    # after 50 items in 5.0 s: 10.0/s, 50 left -> ETA 5s; 500 tokens; $0.05
    lines = buf.getvalue().splitlines()
    assert lines[-1] == "[gw3] bbq litellm:m  50/100   50%  10.0/s  ETA 5s  tok 500  $0.0500"
    assert len(lines) == 3                 # first update, 25 %, 50 %
    bar.close()
    assert buf.getvalue().splitlines()[-1].startswith("[gw3] bbq litellm:m  50/100")


def test_cached_items_do_not_inflate_rate():
    buf, clock = io.StringIO(), Clock()
    bar = Progress(10, "x", stream=buf, every_pct=100, interval_s=1e9, clock=clock)
    bar.update(6, cached=True)
    clock.t = 2.0
    bar.update(2)
    bar.close()
    # 2 fresh items in 2 s = 1.0/s; 2 left -> ETA 2s on the line before close
    last = buf.getvalue().splitlines()[-1]
    assert "8/10" in last and "1.0/s" in last and "cached 6" in last and "ETA 2s" in last


def test_time_based_lines_when_progress_is_slow():
    buf, clock = io.StringIO(), Clock()
    bar = Progress(1000, "slow", stream=buf, every_pct=50, interval_s=5, clock=clock)
    for _ in range(12):
        clock.t += 1.0
        bar.update(1)
    # lines at t=1 (first), t=6, t=11: every 5 s although far below the next 50 % mark
    assert len(buf.getvalue().splitlines()) == 3


def test_tty_redraws_one_line():
    tty, clock = FakeTTY(), Clock()
    bar = Progress(3, "t", stream=tty, clock=clock, tty_interval_s=0.0)
    for _ in range(3):
        clock.t += 1
        bar.update(1)
    bar.close()
    out = tty.getvalue()
    assert out.count("\n") == 1 and out.endswith("\n") and out.count("\r") == 4


def test_env_off_and_file(monkeypatch, tmp_path):
    monkeypatch.setenv("FAIRNESS_PROGRESS", "off")
    bar = Progress(5, "quiet")
    bar.update(5)
    bar.close()
    assert bar.lines_written == 0
    log = tmp_path / "progress.log"
    monkeypatch.setenv("FAIRNESS_PROGRESS", str(log))
    for w in ("gw0", "gw1"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", w)
        b = Progress(2, "f")
        b.update(2)
        b.close()
    lines = log.read_text().splitlines()
    assert lines and all(ln.startswith(("[gw0] f", "[gw1] f")) for ln in lines)


def test_loading_is_its_own_phase_and_eta_comes_from_work_done(monkeypatch):
    """The issue-13 defect: the rate counted the model load (ETA 3h on the first item)."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    buf, clock = io.StringIO(), Clock()
    bar = Progress(240, "bbq", stream=buf, every_pct=10, interval_s=1e9, clock=clock)
    bar.phase("loading model m ...")
    clock.t = 180.0                                   # a slow first load (GGUF conversion)
    bar.start_work(1000, "tok", "model ready in 180.0 s")
    clock.t = 184.0
    bar.update(0, work=100)                           # a batch of shared prefixes: no answer yet
    clock.t = 188.0
    bar.update(40, work=100)
    lines = buf.getvalue().splitlines()
    assert lines[:2] == ["bbq  loading model m ...", "bbq  model ready in 180.0 s"]
    # 100 of 1000 tokens in 4 s: 10 %, ETA 4 * 900 / 100 = 36 s (not counting the load)
    assert lines[2] == "bbq  0/240   10%  0.0/s  ETA 36s  computed 100/1.0k tok"
    # 200 tokens in 8 s: 20 %, ETA 32 s; 40 answers in 8 s = 5.0/s
    assert lines[3] == "bbq  40/240   20%  5.0/s  ETA 32s  computed 200/1.0k tok"


def test_eta_unknown_until_some_work_is_done(monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)     # no "[gw0] " prefix
    buf, clock = io.StringIO(), Clock()
    bar = Progress(10, "x", stream=buf, every_pct=1, interval_s=1e9, clock=clock)
    bar.start_work(1000, "")
    clock.t = 2.0
    bar.update(0, work=40)          # 4 % (e.g. a first small batch): too little to tell
    clock.t = 2.5
    bar.update(0, work=10)          # 5 % in 2.5 s: ETA 2.5 * 95 / 5 = 47.5 s
    lines = buf.getvalue().splitlines()
    assert lines == ["x  0/10    4%  0.0/s  ETA ?", "x  0/10    5%  0.0/s  ETA 48s"]


def test_store_hits_are_shown_and_not_counted_in_the_total(monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)     # no "[gw0] " prefix
    buf, clock = io.StringIO(), Clock()
    bar = Progress(4, "bbq", stream=buf, every_pct=100, interval_s=1e9, clock=clock,
                   show_tokens=True, store_hits=1500)
    clock.t = 2.0
    bar.update(4, tokens=120, cost_usd=0.002)
    assert buf.getvalue().splitlines()[-1] == \
        "bbq  4/4  100%  2.0/s  in 2s  store 1.5k  tok 120  $0.0020"


def test_ask_reports_the_store_hits_on_its_progress_line(tmp_path, monkeypatch):
    """runner.ask: the requests the store answered before asking appear as `store N`."""
    class Echo:
        name = "echo"

        def fingerprint(self):
            return {"backend": "echo"}

        def answer(self, requests, on_response=None):
            out = [Response(key=r.key(), text="x") for r in requests]
            for r, o in zip(requests, out, strict=True):
                on_response(r, o)
            return out

    log = tmp_path / "progress.log"
    monkeypatch.setenv("FAIRNESS_PROGRESS", str(log))
    reqs = [Request(messages=chat(None, f"p{i}"), backend="echo", model="m") for i in range(30)]
    with ResponseStore(tmp_path / "s.sqlite") as st:
        ask(reqs[:25], Echo(), st, progress=False)
        ask(reqs, Echo(), st, progress=True)
    assert "5/5" in log.read_text() and "store 25" in log.read_text()
