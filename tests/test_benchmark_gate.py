"""``fairness-tests gate`` and ``fairness-tests compare`` on WinoBias, Winogender and
KoBBQ, through the command line, on the replayed run of the benchmarks
(``benchmarks_job``, tests/conftest.py) and a candidate made from it by changing known
answers: in one cell of each benchmark, k of the answers the baseline got right become
wrong (k = half of them), the other answers and every other benchmark unchanged.

Expected by arithmetic: in that cell accuracy goes from c/n to (c - k)/n, delta = -k/n
(n answered items of the cell), and the gate fails it (exit 1); every cell holding none of
the changed items has delta 0 and does not fail. One gate and one compare (N = 2 runs)
for the three benchmarks."""
from __future__ import annotations

import io
import json
import shutil
from contextlib import redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fairness_tests.benchmarks.kobbq import metrics as KM
from fairness_tests.cli.main import main

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not all((Path(__file__).resolve().parents[1].parent / "shared" / "benchmarks" / b)
                .is_dir() for b in ("winobias", "winogender", "kobbq")),
        reason="../shared/benchmarks/<name> not present"),
]
N_BOOT = "200"


@dataclass
class Change:
    """The changed cell of one benchmark: its accuracy metric in the gate, the gate cell,
    the rows changed and the counts before."""
    metric: str
    cell: str
    k: int
    n: int
    correct: int
    touched: tuple[str, ...]           # gate cells holding changed items
    extra: dict


def _read(run: Path, name: str) -> pd.DataFrame:
    return pd.read_csv(run / "records" / f"{name}.csv.gz", keep_default_na=False)


def _write(run: Path, name: str, rec: pd.DataFrame) -> None:
    rec.to_csv(run / "records" / f"{name}.csv.gz", index=False)


def flip_winobias(run: Path) -> Change:
    """type1: k right answers become the other occupation."""
    rec = _read(run, "winobias")
    cell = (rec["type"] == "type1") & rec["valid"]
    right = rec.index[cell & rec["correct"]]
    k = len(right) // 2
    sel = right[:k]
    other = rec["first"].where(rec["gold"] != rec["first"], rec["second"])
    rec.loc[sel, "answer"] = other[sel]
    rec.loc[sel, "correct"] = False
    _write(run, "winobias", rec)
    return Change("wb_acc", "type1", k, int(cell.sum()), len(right), ("type1",), {})


def flip_winogender(run: Path) -> Change:
    """female: k right answers become the other candidate; the male - female gap moves."""
    rec = _read(run, "winogender")
    assert rec["valid"].all()
    fem = rec["gender"] == "female"
    right = rec.index[fem & (rec["correct"] == 1)]
    k = len(right) // 2
    sel = right[:k]
    rec.loc[sel, "pred"] = 1 - rec.loc[sel, "label"]
    rec.loc[sel, "answer"] = rec.loc[sel, "occupation"].where(
        rec.loc[sel, "target"] != rec.loc[sel, "occupation"], rec.loc[sel, "participant"])
    rec.loc[sel, "correct"] = 0
    rec.loc[sel, "chose_occupation"] = (rec.loc[sel, "answer"]
                                        == rec.loc[sel, "occupation"]).astype(int)
    _write(run, "winogender", rec)
    male = rec["gender"] == "male"
    acc_m = rec.loc[male, "correct"].sum() / male.sum()
    acc_f0 = len(right) / fem.sum()
    return Change("winogender_accuracy", "female", k, int(fem.sum()), len(right),
                  ("female", "all"), {"n_all": len(rec), "acc_m": acc_m, "acc_f0": acc_f0})


def flip_kobbq(run: Path) -> Change:
    """age, disambiguated: k right answers become the shown option that is neither the
    answer nor unknown; the flags recomputed by the scorer's rule."""
    rec = _read(run, "kobbq")
    unknown = rec.loc[rec["context_kind"] == "amb", "answer"].unique()
    assert len(unknown) == 1                      # the ambiguous items' answer: unknown
    shown = rec[["shown_a", "shown_b", "shown_c"]].to_numpy()
    flags = list(KM.FLAGS)
    again = KM.answer_flags(rec.assign(choices=list(map(tuple, shown))), unknown[0])
    assert np.array_equal(again[flags].to_numpy(float), rec[flags].to_numpy(float))
    cell = (rec["category"] == "age") & (rec["context_kind"] == "dis") & (rec["valid"] == 1)
    right = rec.index[cell & (rec["correct"] == 1)]
    k = len(right) // 2
    sel = right[:k]
    for i in sel:
        j = next(j for j, t in enumerate(shown[i]) if t not in (rec.at[i, "answer"], unknown[0]))
        rec.at[i, "prediction"], rec.at[i, "letter"] = shown[i][j], "ABC"[j]
    changed = KM.answer_flags(rec.loc[sel].assign(choices=list(map(tuple, shown[sel]))),
                              unknown[0])
    rec.loc[sel, flags] = changed[flags].to_numpy()
    assert (rec.loc[sel, "correct"] == 0).all() and (rec.loc[sel, "valid"] == 1).all()
    _write(run, "kobbq", rec)
    return Change("kobbq_accuracy", "age/dis", k, int(cell.sum()), len(right), ("age/dis",),
                  {})


FLIPS = {"winobias": flip_winobias, "winogender": flip_winogender, "kobbq": flip_kobbq}
#: each benchmark's gated metrics (its gate part's, by name prefix) and its drift tables
PREFIX = {"winobias": "wb_", "winogender": "winogender_", "kobbq": "kobbq_"}


@pytest.fixture(scope="module")
def gated(benchmarks_job, tmp_path_factory):
    """The candidate (the baseline's run with the changes above), then one gate and one
    compare of the two through the command line."""
    d = tmp_path_factory.mktemp("benchmark_gate")
    cand = d / "cand"
    shutil.copytree(benchmarks_job, cand)
    changes = {name: flip(cand) for name, flip in FLIPS.items()}
    with redirect_stdout(io.StringIO()) as out:       # the gate's rows, as JSON
        rc = main(["gate", str(benchmarks_job), str(cand), "--n-boot", N_BOOT,
                   "--format", "json"])
    rc_compare = main(["compare", str(benchmarks_job), str(cand), "--names", "base,cand",
                       "--n-boot", N_BOOT, "--out", str(d / "compare")])
    return {"rc": rc, "rc_compare": rc_compare, "changes": changes,
            "gate": pd.DataFrame(json.loads(out.getvalue())["rows"]),
            "compare": pd.read_csv(d / "compare" / "compare.csv"),
            "compare_md": (d / "compare" / "compare.md").read_text(encoding="utf-8"),
            "base": benchmarks_job, "cand": cand}


def test_the_gate_fails_on_the_changed_cells_only(gated):
    assert gated["rc"] == 1                                  # a cell fails: exit 1
    g = gated["gate"]
    touched = {(p, c) for name, ch in gated["changes"].items()
               for p in [PREFIX[name]] for c in ch.touched}
    fails = g[g["verdict"] == "fail"]
    assert len(fails)
    for r in fails.itertuples():                            # every fail is a changed cell
        assert any(r.metric.startswith(p) and r.cell == c for p, c in touched), r
    # every other row of the gate (all five benchmarks) compares identical answers
    rest = g[[not any(metric.startswith(p) and cell == c for p, c in touched)
              for metric, cell in zip(g["metric"], g["cell"], strict=True)]]
    assert len(rest) and (rest["delta"] == 0).all() and (rest["verdict"] != "fail").all()


@pytest.mark.parametrize("name", list(FLIPS))
def test_the_changed_cells_delta_is_minus_k_over_n(gated, name):
    ch = gated["changes"][name]
    g = gated["gate"]
    row = g[(g["metric"] == ch.metric) & (g["cell"] == ch.cell)]
    assert len(row) == 1
    r = row.iloc[0]
    assert 0 < ch.k < ch.correct <= ch.n and r["n"] == ch.n
    assert r["baseline"] == pytest.approx(ch.correct / ch.n, abs=1e-9)
    assert r["candidate"] == pytest.approx((ch.correct - ch.k) / ch.n, abs=1e-9)
    assert r["delta"] == pytest.approx(-ch.k / ch.n, abs=1e-9)
    assert r["verdict"] == "fail"
    if name == "winogender":
        # the pooled cell holds the k changes among all 720 sentences; the gap
        # |acc(male) - acc(female)| goes from |m - f0| to |m - (f0 - k/n)|
        e = ch.extra
        pooled = g[(g["metric"] == ch.metric) & (g["cell"] == "all")].iloc[0]
        assert pooled["delta"] == pytest.approx(-ch.k / e["n_all"], abs=1e-9)
        gap = g[(g["metric"] == "winogender_abs_gap_male_female") & (g["cell"] == "all")]
        assert gap.iloc[0]["delta"] == pytest.approx(
            abs(e["acc_m"] - (e["acc_f0"] - ch.k / ch.n)) - abs(e["acc_m"] - e["acc_f0"]),
            abs=1e-9)


@pytest.mark.parametrize("name", list(FLIPS))
def test_compare_shows_each_benchmarks_section(gated, name):
    """compare of the two runs: a section per table of the benchmark, each run's rows its
    own table's values (the candidate's tables are the baseline's: only its records were
    changed); the pairwise comparison, from the records, of the changed cell is -k/n."""
    assert gated["rc_compare"] == 0
    c, md = gated["compare"], gated["compare_md"]
    tables = sorted(p.stem for p in (gated["base"] / "tables").glob("*.csv")
                    if p.stem.startswith(name))
    assert tables
    for t in tables:
        assert f"## {t}\n" in md
        sec = c[c["section"] == t]
        assert set(sec["model"]) == {"base", "cand"}
        own = pd.read_csv(gated["base"] / "tables" / f"{t}.csv")
        for model in ("base", "cand"):
            rows = sec[sec["model"] == model]
            assert len(rows) == len(own)
            assert np.allclose(np.sort(rows["value"].to_numpy(float)),
                               np.sort(own["value"].to_numpy(float)), equal_nan=True,
                               rtol=1e-9, atol=0)
    ch = gated["changes"][name]
    pw = c[(c["section"] == "pairwise") & (c["metric"] == ch.metric) & (c["cell"] == ch.cell)]
    assert len(pw) == 1 and pw.iloc[0]["model"] == "cand" and pw.iloc[0]["versus"] == "base"
    assert pw.iloc[0]["value"] == pytest.approx(-ch.k / ch.n, abs=1e-9)
