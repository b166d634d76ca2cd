"""The committed drift snapshots of the benchmarks beside BBQ (CrowS-Pairs, Winogender,
WinoBias, KoBBQ and the templates lending example, embedded model) are checked by the
packaged suite's drift test: in a project of its own (the suite imported as ``init``
writes it, every packaged snapshot copied beside it), the replayed run of those
benchmarks passes against them, and a table value moved beyond its tolerance fails that
table's test and no other. The default run's tables, absent from this run, are skipped
tests whose snapshots are kept (not reported unused, which would fail the session).

One replay of the five benchmarks per session (``benchmarks_job``, tests/conftest.py),
read through ``--fairness-run``; each inner session takes about a second (the one under
``-n 2`` about fifteen: worker start-up)."""
from __future__ import annotations

import csv
import math
import shutil
from pathlib import Path

import pytest
import yaml

from conftest import BESIDE_BBQ, EMBEDDED, LENDING, SNAPSHOTS, drift_session
from fairness_tests.pipeline.benchmark import benchmarks
from fairness_tests.rules import load_rules
from fairness_tests.suite.properties import drift_tables

pytest_plugins = ["pytester"]
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not all((Path(__file__).resolve().parents[1].parent / "shared" / "benchmarks" / b)
                .is_dir() for b in BESIDE_BBQ if b != "templates"),
        reason="../shared/benchmarks/<name> not present"),
]

#: how far a value is moved: beyond every tolerance the chosen metric has (checked)
SHIFT = 0.25


def own_tables(name: str, run: Path) -> list[str]:
    """The benchmark's drift tables that the run holds."""
    declared = next(b for b in benchmarks() if b.name == name).drift_tables
    return [t for t in declared if (run / "tables" / f"{t}.csv").is_file()]


#: the tables whose snapshots are named by the benchmark file's name too (the lending
#: example's)
QUALIFIED = {t: yaml.safe_load(LENDING.read_text(encoding="utf-8"))["name"]
             for b in benchmarks() if b.reads_benchmark_file for t in b.drift_tables}


def drift_id(table: str) -> str:
    """The drift test of a table, named as its snapshot file is (the model id's ``:``
    left out; a benchmark file's tables: its name last)."""
    q = f"-{QUALIFIED[table]}" if table in QUALIFIED else ""
    return f"test_metric_table_drift[{EMBEDDED.replace(':', '')}-{table}{q}]"


def test_the_committed_snapshots_hold_for_the_replayed_benchmarks(drift_project, benchmarks_job):
    present = [t for b in BESIDE_BBQ for t in own_tables(b, benchmarks_job)]
    assert all(own_tables(b, benchmarks_job) for b in BESIDE_BBQ)   # each has a table
    for t in present:                                              # committed, one each
        assert (SNAPSHOTS / f"{drift_id(t)}.txt").is_file(), t
    # under xdist, as the README's test command runs the suite
    r = drift_session(drift_project, benchmarks_job, "-n", "2", "-p", "no:benchmark")
    r.assert_outcomes(passed=len(present), skipped=len(drift_tables()) - len(present))
    out = r.stdout.str()
    for t in present:
        assert any(drift_id(t) in line and "PASSED" in line for line in out.splitlines()), t
    assert f"{len(present)} snapshots passed." in out
    assert "unused" not in out
    # nothing rewritten: the copies are still the packaged files
    for p in SNAPSHOTS.glob("*.txt"):
        assert (drift_project.path / "__snapshots__" / "test_fairness" / p.name).read_bytes() == \
            p.read_bytes()


def _move_one_value(table_csv: Path) -> tuple[str, float, float]:
    """Add SHIFT to the value of the first row with a finite value whose metric's drift
    tolerance SHIFT exceeds; the file is otherwise rewritten field for field. Returns
    (metric, old value, new value)."""
    with table_csv.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    head = rows[0]
    iv, im = head.index("value"), head.index("metric")
    tolerance = load_rules(None, EMBEDDED).tolerance
    for row in rows[1:]:
        v = float(row[iv]) if row[iv] else math.nan
        tol = tolerance(row[im])
        if math.isfinite(v) and not tol.within_ci and max(tol.abs, tol.rel * abs(v)) < SHIFT:
            row[iv] = repr(v + SHIFT)
            break
    else:
        raise AssertionError(f"{table_csv}: no row to move")
    with table_csv.open("w", newline="", encoding="utf-8") as fh:
        csv.writer(fh, lineterminator="\n").writerows(rows)
    return row[im], v, v + SHIFT


@pytest.mark.parametrize("name", BESIDE_BBQ)
def test_a_moved_value_fails_its_tables_drift_test_only(name, drift_project, benchmarks_job,
                                                        tmp_path):
    run = tmp_path / "run"
    shutil.copytree(benchmarks_job, run)
    table = own_tables(name, run)[0]
    metric, _, new = _move_one_value(run / "tables" / f"{table}.csv")
    present = [t for b in BESIDE_BBQ for t in own_tables(b, run)]
    r = drift_session(drift_project, run)
    r.assert_outcomes(passed=len(present) - 1, failed=1,
                      skipped=len(drift_tables()) - len(present))
    out = r.stdout.str()
    assert any(drift_id(table) in line and "FAILED" in line for line in out.splitlines())
    assert "beyond tolerance (1):" in out
    assert any(f" {metric}: " in line and f" -> {new:.6f} (tolerance abs" in line
               for line in out.splitlines()), out[-4000:]
    # a failure rewrites nothing
    snap = SNAPSHOTS / f"{drift_id(table)}.txt"
    assert (drift_project.path / "__snapshots__" / "test_fairness" / snap.name).read_bytes() == \
        snap.read_bytes()
