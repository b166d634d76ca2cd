"""The small ones of issue 27 (item 7) through ``fairness-tests audit`` against the
loopback server (tests/fault_server.py): the new-requests counter of ``run.json`` counts
requests sent (a resume that asks failed requests again is not "0 new"); a cost litellm
has no price for is "unknown" in the summary, ``run.json`` and the card, never 0; a
consistency-only run is labelled ``consistency`` in its progress lines and ``run.json``;
``backend_info.model`` names the model; no unclosed-session warning.

Counts by hand: ``--benchmarks consistency --categories Race_x_SES --limit 1 --repeats 5``
asks 1 item per context x polarity cell of one dataset = 2 x 2 = 4 items, 5 repeats
each: 20 requests (at least 20: the progress bar is shown; what is checked does not
depend on the count beyond that)."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import yaml

from fairness_tests.cli.main import main
from fairness_tests.models.store.store import ResponseStore

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fault_server import FaultServer  # noqa: E402

UNPRICED = "openai/unpriced-model"
N = 4 * 5


def letters(prompt: str) -> dict[str, float]:
    return {"a": 0.6, "b": 0.3, "c": 0.1}


def audit(server, tmp_path, *extra, out="report", model=UNPRICED):
    return main(["audit", "--live", "--backend", "litellm", "--model", model,
                 "--api-base", server.url, "--store", str(tmp_path / "s.sqlite"),
                 "--recordings", "--benchmarks", "consistency", "--categories",
                 "Race_x_SES", "--limit", "1", "--repeats", "5", "--n-boot", "100",
                 "--out", str(tmp_path / out), "--force", *extra])


def run_meta(tmp_path, out="report") -> dict:
    return json.loads((tmp_path / out / "run" / "run.json").read_text())


def test_a_resume_counts_the_requests_it_sent_and_unknown_cost_stays_unknown(
        tmp_path, monkeypatch, capfd):
    """Run 1: the server answers every request 400 (not retried): 24 error rows. Run 2
    (the server back): the 24 are asked again: 24 sent, although the store's row count
    does not change (each error row is replaced). Run 3: nothing sent."""
    monkeypatch.setenv("FAIRNESS_PROGRESS", "off")
    with FaultServer(default="400") as down:
        audit(down, tmp_path, out="down")
        assert len(down.hits) == N
    with ResponseStore(tmp_path / "s.sqlite") as st:
        assert len(st) == N
    capfd.readouterr()
    monkeypatch.setenv("FAIRNESS_PROGRESS", "stderr")
    with FaultServer(answers=letters) as up:
        audit(up, tmp_path)
        assert len(up.hits) == N
        out, err = capfd.readouterr()
        up.reset()
        audit(up, tmp_path, out="again")
        assert len(up.hits) == 0
    with ResponseStore(tmp_path / "s.sqlite") as st:
        assert len(st) == N
    meta = run_meta(tmp_path)
    assert meta["requests"] == {"consistency": N, "consistency_new": N}
    assert run_meta(tmp_path, "again")["requests"] == {"consistency": N,
                                                       "consistency_new": 0}
    # labels: the protocol asked, never "bbq"
    bars = [re.sub(r"^\[gw\d+\] ", "", line).split()[0]      # [gwN]: an xdist worker's
            for line in err.splitlines() if f"/{N}" in line]
    assert bars and set(bars) == {"consistency"}, err[-1500:]
    assert meta["backend_info"]["model"] == UNPRICED
    assert "Unclosed" not in err
    # unknown cost: unknown in the summary, run.json and the card
    usage = meta["asking"]["usage"]
    assert usage["cost_usd"] is None and usage["cost_unknown_calls"] == N
    assert usage["calls"] == N and usage["cost_known_usd"] == 0
    assert f"cost unknown ({N} repl(ies) without a price)" in out
    assert f"spent: {N} repl(ies) in {N} HTTP attempt(s) (0 retries)" in out
    assert "0.0000" not in out
    card = yaml.safe_load((tmp_path / "report" / "card" / "card.yaml").read_text())
    asking = card["evaluation_protocol"]["asking"]
    assert asking["cost_usd"] == "unknown"
    assert f"cost unknown ({N} call(s) without a price)" in asking["statement"]


def test_a_priced_model_shows_its_cost(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FAIRNESS_PROGRESS", "off")
    with FaultServer(answers=letters) as s:
        audit(s, tmp_path, model="openai/gpt-4o-mini")
    usage = run_meta(tmp_path)["asking"]["usage"]
    assert usage["cost_usd"] > 0 and usage["cost_unknown_calls"] == 0
    assert f"cost {usage['cost_usd']:.4f} USD" in capsys.readouterr().out
