"""Drift snapshots of a team's own benchmark files are named by the file's benchmark
(its ``name:``): two files' runs of one model each get snapshots of their own, neither is
compared with the other's (nor with the packaged lending example's, which ``init`` copies
into every project), and a run of neither keeps them all (skipped tests, not reported
unused: that would fail the session).

The runs are made from fake answers through the benchmark's own family (file A: a
female applicant's P(yes) 1/4 against a male's 1/2, logit gap -ln 3; file B: 1/2 for
both, gap 0) and read by the packaged drift test through ``--fairness-run``."""
from __future__ import annotations

import math
from pathlib import Path

from conftest import EMBEDDED, SNAPSHOTS, drift_session
from fairness_tests.benchmarks.templates.family import TemplatesFamily
from fairness_tests.models.requests.request import Response
from fairness_tests.pipeline.benchmark import Asked
from fairness_tests.pipeline.config import AuditConfig
from fairness_tests.plugin.parametrize import file_safe
from fairness_tests.run.metadata import RunMetadata, Source
from fairness_tests.run.result import RunResult
from fairness_tests.suite.properties import drift_tables
from tests.test_templates import GOOD

pytest_plugins = ["pytester"]

#: the tables of a decision outcome, which a yes/no file's run holds
DECISION = ("templates_groups", "templates_summary")
LENDING = "lending-decisions"          # the packaged example's name: (its snapshots' names)


def _run(tmp_path: Path, name: str, p_female: float) -> Path:
    """A saved run of the embedded model on GOOD renamed ``name``: P(yes) 1/2 for male
    items, ``p_female`` for female ones."""
    f = tmp_path / f"{name}.yaml"
    f.write_text(GOOD.replace("name: tiny", f"name: {name}"), encoding="utf-8")
    fam = TemplatesFamily(AuditConfig(benchmark_file=str(f), n_boot=100))
    reqs = fam.requests()

    def answer(r):
        p = p_female if "female" in r.meta["slice"] else 0.5
        yes = r.continuation.lower() == "yes"
        return Response(key=r.key(), logprob=math.log(p if yes else 1 - p) - math.log(2))
    res = fam.results({"templates": Asked(reqs, [answer(r) for r in reqs])})
    meta = RunMetadata(model=EMBEDDED, backend=None, mode="scored",
                       source=Source(kind="audit"), fairness_tests_version="test",
                       infos=dict(res.metadata))
    return RunResult(metadata=meta, tables=res.tables, records=res.records).save(
        tmp_path / f"run-{name}")


def snapshot(pytester, table: str, qualifier: str) -> Path:
    return (pytester.path / "__snapshots__" / "test_fairness" /
            f"test_metric_table_drift[{file_safe(EMBEDDED)}-{table}-{qualifier}].txt")


def test_two_benchmark_files_keep_snapshots_of_their_own(drift_project, tmp_path):
    a, b = _run(tmp_path, "team-a", 0.25), _run(tmp_path, "team-b", 0.5)
    packaged = {p.name: p.read_bytes() for p in SNAPSHOTS.glob("*.txt")}
    assert all(snapshot(drift_project, t, LENDING).name in packaged for t in DECISION)
    n = len(drift_tables())

    # skipped: the other tables' n - 3 tests, each decision table's stored snapshots of
    # other files, the generate table's one (a run of a yes/no file has none)
    r = drift_session(drift_project, a, "--snapshot-update")          # A's snapshots written
    r.assert_outcomes(passed=2, skipped=n - 3 + 2 * 1 + 1)
    assert all(snapshot(drift_project, t, "team-a").is_file() for t in DECISION)
    # B before it has any: no snapshot to compare with (not A's, not the example's)
    r = drift_session(drift_project, b)
    r.assert_outcomes(failed=2, skipped=n - 3 + 2 * 2 + 1)
    assert "beyond tolerance" not in r.stdout.str()
    r = drift_session(drift_project, b, "--snapshot-update")
    r.assert_outcomes(passed=2, skipped=n - 3 + 2 * 2 + 1)
    assert all(snapshot(drift_project, t, "team-a").is_file() for t in DECISION)
    # the two files' tables differ: named by model and table alone, one would fail the other
    for t in DECISION:
        assert snapshot(drift_project, t, "team-a").read_text() != \
            snapshot(drift_project, t, "team-b").read_text()

    # each now passes against its own, the other two files' kept (skipped), none unused
    for run, own, others in ((a, "team-a", ("team-b", LENDING)),
                             (b, "team-b", ("team-a", LENDING))):
        r = drift_session(drift_project, run)
        r.assert_outcomes(passed=2, skipped=n - 3 + 2 * 2 + 1)
        assert r.ret == 0
        out = r.stdout.str()
        assert "2 snapshots passed." in out and "unused" not in out
        for t in DECISION:
            assert any(f"{file_safe(EMBEDDED)}-{t}-{own}] PASSED" in ln
                       for ln in out.splitlines()), t
            for o in others:
                assert any(f"{file_safe(EMBEDDED)}-{t}-{o}] SKIPPED" in ln
                           for ln in out.splitlines()), (t, o)
    # the packaged snapshots are untouched
    for name, data in packaged.items():
        assert (drift_project.path / "__snapshots__" / "test_fairness" / name).read_bytes() == data


def test_a_run_without_a_benchmark_file_keeps_every_files_snapshots(drift_project, tmp_path):
    """A run of no templates table: each decision table's stored snapshots (the lending
    example's and one team's) are kept as skipped tests of their own ids, the generate
    table (no snapshot) one skipped test, the other tables one each."""
    n = len(drift_tables())
    a = _run(tmp_path, "team-a", 0.25)
    drift_session(drift_project, a, "--snapshot-update").assert_outcomes(
        passed=2, skipped=n - 3 + 2 + 1)
    empty = RunResult(metadata=RunMetadata(model=EMBEDDED, backend=None, mode="scored",
                                           source=Source(kind="audit"),
                                           fairness_tests_version="test"))
    r = drift_session(drift_project, empty.save(tmp_path / "run-empty"), "--snapshot-update")
    r.assert_outcomes(skipped=n - 3 + 2 * 2 + 1)
    out = r.stdout.str()
    assert "unused" not in out and "deleted" not in out
    assert all(snapshot(drift_project, t, q).is_file()
               for t in DECISION for q in ("team-a", LENDING))
