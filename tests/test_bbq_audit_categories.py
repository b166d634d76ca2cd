"""``audit --categories``: the audit asks single-attribute categories too, through a real
OpenAI-compatible server on 127.0.0.1 (tests/fault_server.py) that always answers one
letter; the run, its SF/DF groups (one attribute), the card, the drift snapshot and
the gate cover every category asked. Expected accuracies are counted here from the
data files: a model that always answers "a" is right exactly where the label is 0."""
from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from fairness_tests.cli.main import main
from fairness_tests.plugin.snapshot import render_table
from fairness_tests.run.result import RunResult

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fault_server import FaultServer  # noqa: E402
from helpers import RAN  # noqa: E402

OFFICIAL_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "bbq_official"
CATS = ("Age", "Religion")
LIMIT = 3
pytestmark = pytest.mark.skipif(not (OFFICIAL_DIR / "data" / "Age.jsonl").exists(),
                                reason="../shared/bbq_official not present")


@pytest.fixture(autouse=True)
def quiet(monkeypatch):
    monkeypatch.setenv("FAIRNESS_PROGRESS", "off")


def audit(url, tmp_path, out, *extra):
    return main(["audit", "--live", "--backend", "litellm", "--model", "openai/gpt-4o-mini",
                 "--api-base", url, "--store", str(tmp_path / f"{out}.sqlite"), "--recordings",
                 "--benchmarks", "bbq", "--rotations", "none", "--categories", *CATS,
                 "--bbq-dir", str(OFFICIAL_DIR), "--limit", str(LIMIT), "--n-boot", "100",
                 "--out", str(tmp_path / out), *extra])


def expected_accuracy(letter_index: int) -> dict:
    """(category, context) -> share of the asked items whose label is ``letter_index``:
    the first LIMIT items by example_id of every context x polarity cell."""
    cells = defaultdict(list)
    for cat in CATS:
        for line in open(OFFICIAL_DIR / "data" / f"{cat}.jsonl", encoding="utf-8"):
            it = json.loads(line)
            cells[(cat, it["context_condition"], it["question_polarity"])].append(it)
    out = defaultdict(list)
    for (cat, ctx, _), items in cells.items():
        for it in sorted(items, key=lambda x: x["example_id"])[:LIMIT]:
            out[(cat, ctx)].append(it["label"] == letter_index)
    return {k: sum(v) / len(v) for k, v in out.items()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("audit_categories")
    with FaultServer(answers=lambda prompt: {"a": 1.0}) as s:
        rc_a = audit(s.url, tmp, "always_a")
    with FaultServer(answers=lambda prompt: {"b": 1.0}) as s:
        rc_b = audit(s.url, tmp, "always_b")
    return tmp, rc_a, rc_b


def test_the_audit_asks_and_scores_the_categories_asked(runs):
    tmp, rc_a, _ = runs
    assert rc_a in RAN
    run = RunResult.load(tmp / "always_a" / "run")
    bbq = run.tables["bbq"]
    assert set(bbq["dataset"]) == set(CATS)
    acc = bbq[(bbq.metric == "accuracy") & (bbq.polarity == "all")]
    for (cat, ctx), want in expected_accuracy(0).items():
        got = acc[(acc.dataset == cat) & (acc.context == ctx)]["value"].item()
        assert got == pytest.approx(want, abs=1e-9)
    b = run.metadata.infos["bbq"]
    assert b.categories == list(CATS) and b.target_loc == dict.fromkeys(CATS, "derived")
    assert b.n_items == len(CATS) * 4 * LIMIT
    groups = run.tables["bbq_groups"]
    assert set(groups[groups.dataset == "Age"]["group"]) <= {"old", "nonOld"}


def test_card_snapshot_and_gate_cover_every_category(runs, tmp_path, capsys):
    tmp, _, rc_b = runs
    assert rc_b in RAN
    b = RunResult.load(tmp / "always_b" / "run").tables["bbq"]
    acc = b[(b.metric == "accuracy") & (b.polarity == "all")]
    for (cat, ctx), want in expected_accuracy(1).items():
        assert acc[(acc.dataset == cat) & (acc.context == ctx)]["value"].item() == \
            pytest.approx(want, abs=1e-9)
    run = RunResult.load(tmp / "always_a" / "run")
    md = (tmp / "always_a" / "card" / "card.md").read_text(encoding="utf-8")
    assert "**categories:** Age, Religion" in md
    assert "Age" in md and "Religion" in md
    snap = render_table(run.tables["bbq"])
    for cat in CATS:
        assert f"\n{cat}/ambig/all | accuracy |" in snap
    capsys.readouterr()
    rc = main(["gate", str(tmp / "always_a" / "run"), str(tmp / "always_b" / "run"),
               "--format", "json", "--n-boot", "100"])
    out, err = capsys.readouterr()
    assert rc in RAN, err
    doc = json.loads(out)
    cells = {r["cell"] for r in doc["rows"]}
    for cat in CATS:
        assert any(c.startswith(f"{cat}/") for c in cells), cells
