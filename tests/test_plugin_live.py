"""A live pytest smoke run against an API server (issue 27, item 6): the protocol options
of the command line are pytest options too, so ``--fairness-limit 1`` makes the run a
handful of requests, counted by the loopback server (tests/fault_server.py); its stderr
has no ``Unclosed client session`` warning, its ``run.json`` counts each protocol's
requests under its own name, and a second session asks nothing.

Counts by hand: ``--fairness-limit 1`` keeps 1 item per dataset x context x polarity
cell of the two default categories: 2 x 2 x 2 = 8 items. ``bbq`` (no rotations) asks
each once: 8 requests; ``consistency`` asks the sample (the same 8 items, per cell
min(56, 1) = 1) twice: 16 requests, of which repeat 0 is the bbq request itself, so 8
new. 8 + 8 = 16 requests reach the server."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from fault_server import FaultServer  # noqa: E402

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.slow

BASE = "text-completion-openai/base-x"
SUITE = """
import pytest

@pytest.mark.bbq
@pytest.mark.fairness_rules(metrics="accuracy")
def test_accuracy(fairness_verdict):
    fairness_verdict.check()
"""


def letters(prompt: str) -> dict[str, float]:
    return {"a": 0.6, "b": 0.3, "c": 0.1}


@pytest.mark.timeout(660)          # two inner sessions, 300 s each at most
def test_live_pytest_smoke_with_a_limit_asks_a_handful(pytester, monkeypatch, tmp_path):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))        # this checkout's package
    monkeypatch.setenv("FAIRNESS_PROGRESS", "stderr")
    pytester.makepyfile(test_suite=SUITE)
    store, report = tmp_path / "s.sqlite", tmp_path / "report"
    # paths as --opt=PATH and --rootdir: pytest infers no rootdir from an option's value
    args = [f"--rootdir={pytester.path}", "--fairness-live", "--fairness-model", BASE,
            f"--fairness-store={store}", f"--fairness-bbq-dir={ROOT.parent / 'shared' / 'bbq'}",
            "--fairness-benchmarks", "bbq", "--fairness-benchmarks", "consistency",
            "--fairness-limit", "1", "--fairness-repeats", "2", "--fairness-rotations",
            "none", "--fairness-n-boot", "100",
            "-p", "no:cacheprovider", "-p", "no:randomly", "-rs"]
    with FaultServer(base_model=True, answers=letters) as s:
        first = pytester.runpytest_subprocess(*args, f"--fairness-api-base={s.url}",
                                              f"--fairness-report={report}", timeout=300)
        assert len(s.hits) == 8 + 8
        s.reset()
        again = pytester.runpytest_subprocess(*args, f"--fairness-api-base={s.url}",
                                              f"--fairness-report={report}-again",
                                              timeout=300)
        assert len(s.hits) == 0
    err = "\n".join(first.errlines)
    assert first.ret in (0, 1), "\n".join(first.outlines[-30:]) + err[-3000:]
    assert "Unclosed" not in err, err[-3000:]
    meta = json.loads((report / "text-completion-openai_base-x" / "run" / "run.json")
                      .read_text())
    assert meta["requests"] == {"bbq": 8, "bbq_new": 8, "consistency": 16,
                                "consistency_new": 8}
    assert meta["config"]["limit"] == 1 and meta["config"]["benchmarks"] == ["bbq",
                                                                           "consistency"]
    assert meta["backend_info"]["model"] == BASE
    assert meta["asking"]["prompt"]["used"] == "completion-plain"
    assert meta["bbq"]["invalid_answers"] == 0
    assert again.ret == first.ret
    meta = json.loads((tmp_path / "report-again" / "text-completion-openai_base-x" / "run" /
                       "run.json").read_text())
    assert meta["requests"] == {"bbq": 8, "bbq_new": 0, "consistency": 16,
                                "consistency_new": 0}
