"""``--limit N`` is a working smoke run on the shipped recordings, and a run too small for
its intervals says so instead of failing rules on one template (issue 22, section 7)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from helpers import copy_store

from fairness_tests.benchmarks.bbq.family import limit_cells
from fairness_tests.cli.main import main

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(not (REPO.parent / "shared" / "bbq" / "Race_x_SES.jsonl")
                                .exists(), reason="../shared/bbq not present")


@pytest.fixture(scope="module")
def store(tmp_path_factory, recorded_store) -> Path:
    """One store for the module: a copy of the session's store of the shipped recordings
    (imported once per session, tests/conftest.py); each audit imports them again, which
    finds them all there."""
    return copy_store(recorded_store, tmp_path_factory.mktemp("smoke") / "s.sqlite")


def audit(store: Path, out: Path, *args: str) -> int:
    return main(["audit", "--store", str(store), "--out", str(out), "-q", "--n-boot", "100",
                 *args])


def verdicts(out: Path) -> pd.DataFrame:
    return pd.read_csv(out / "run" / "verdicts.csv")


def test_limit_picks_the_sample_first():
    """Four items in one cell, the 'sample' holds ids 3 and 4: limit 1 keeps 3 (the
    sample first, by id), limit 3 keeps 3, 4 and then the lowest other id, 1."""
    items = pd.DataFrame({"dataset": ["D"] * 4, "example_id": [1, 2, 3, 4],
                          "context": ["ambig"] * 4, "polarity": ["neg"] * 4})
    sample = items[items["example_id"] >= 3]
    assert limit_cells(items, 1, sample)["example_id"].tolist() == [3]
    assert limit_cells(items, 3, sample)["example_id"].tolist() == [1, 3, 4]
    assert limit_cells(items, 1)["example_id"].tolist() == [1]          # no sample: by id
    assert limit_cells(items, None, sample)["example_id"].tolist() == [1, 2, 3, 4]


def test_limit_2_replays_the_shipped_recordings(store, tmp_path, monkeypatch):
    """Today's defect: exit 3, the rotations of the limited items were never recorded.
    The 2 items per cell come from the consistency sample, whose rotations and 20
    repeats are recorded: 2 datasets x 2 contexts x 2 polarities x 2 items = 16 items,
    each under 3 rotations, and 16 x 20 consistency answers. Issue 32: every cell is
    below the one minimum size (30; the largest, the pooled consistency cell, holds 16
    items), so nothing is judged: exit 5, never a verdict on 4 items."""
    monkeypatch.setenv("FAIRNESS_PROGRESS", "off")
    rc = audit(store, tmp_path / "o", "--benchmarks", "bbq", "consistency", "--limit", "2")
    assert rc == 5
    records = pd.read_csv(tmp_path / "o" / "run" / "records" / "bbq.csv.gz")
    assert records[["dataset", "example_id"]].drop_duplicates().shape[0] == 16
    v = verdicts(tmp_path / "o")
    assert (v["status"] == "not_evaluable").all()
    mfaa = v[v["rule"] == "mfaa_floor"].set_index("cell")["why"]
    assert mfaa["all"] == "only 16 items (< min_n 30)"
    assert mfaa["Race_x_SES/ambig"] == "only 4 items (< min_n 30)"
    # position bias rests on the 4 items' 3 rotations each: 12 answers
    assert (v.loc[v["rule"] == "position_bias_bound", "why"]
            == "only 12 items (< min_n 30)").all()


def test_one_template_is_not_evaluable_not_a_failure(store, tmp_path, monkeypatch):
    """``--limit 1 --rotations none``: each cell's interval rests on one template; the
    interval rules are not evaluable and say why (today: sdis_bound failed on [1, 1]).
    Every cell is also below the minimum size: nothing is judged, exit 5."""
    monkeypatch.setenv("FAIRNESS_PROGRESS", "off")
    rc = audit(store, tmp_path / "o", "--benchmarks", "bbq", "--limit", "1",
               "--rotations", "none")
    assert rc == 5
    v = verdicts(tmp_path / "o")
    sdis = v[v["rule"] == "sdis_bound"]
    assert len(sdis) == 2 and (sdis["status"] == "not_evaluable").all()
    assert sdis["why"].str.contains("a single cluster: no interval").all()
    assert not (v["status"] == "fail").any()
