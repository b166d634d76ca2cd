"""Test parameters from a run: one test per verdict row (model, rule, cell), per
metric table (drift snapshots) and per gate row (candidate, metric, cell). Each
parameter object's ``check()`` passes, fails with the full explanation, skips (not
evaluable) or is run as a strict xfail (a declared expected failure).

The gate's rows follow :meth:`fairness_tests.pipeline.gate_report.GateReport.exit_code`:
a non-inferiority cell that is not evaluable fails (not shown); a harm cell that is not
evaluable skips; a gate that compared nothing adds one failing test
(``<cand>-vs-<baseline>-nothing-compared``) and a gate with no rows at all (the CLI's
refusal) one failing ``<cand>-no-records``: the gate is never green having compared
nothing."""
from __future__ import annotations

import fnmatch
import math
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from fairness_tests.core.fmt import shown
from fairness_tests.pipeline.benchmark import benchmarks
from fairness_tests.plugin.session import Unavailable
from fairness_tests.rules.reasons import fill_reason


@dataclass
class Verdict:
    model: str
    row: dict
    rule: Any                                 # thresholds.Rule
    all_rows: Any                             # the verdict table of this model (for worst cells)
    on_missing: str = "skip"

    @property
    def status(self) -> str:
        return self.row["status"]

    def message(self) -> str:
        from fairness_tests.rules.evaluate import worst_cells
        r, rule = self.row, self.rule
        name = f"{'|' if rule.abs else ''}{rule.metric}{'|' if rule.abs else ''}"
        n = ""
        lines = [
            f"{rule.id} {r['status'].upper()} for {self.model}, cell {r['cell']}",
            f"  metric:    {name} = {_fmt(r['value'])} (95% CI {_fmt(r['ci_low'])} .. "
            f"{_fmt(r['ci_high'])}){n} from table {rule.table!r}",
            f"  threshold: {rule.describe()}",
            f"  outcome:   {r['why']}",
            f"  rationale: {' '.join(str(rule.rationale).split())}",
        ]
        w = worst_cells(self.all_rows, rule.id, k=3)
        if len(w):
            lines.append("  worst cells of this rule: " + "; ".join(
                f"{x['cell']} {_fmt(x['value'])} [{_fmt(x['ci_low'])}, {_fmt(x['ci_high'])}] "
                f"({x['status']})" for _, x in w.iterrows()))
        if rule.source:
            lines.append(f"  rule defined at {rule.source}")
        return "\n".join(lines)

    def check(self) -> None:
        if self.status == "not_evaluable":
            pytest.skip(f"{self.rule.id} not evaluable for {self.model} {self.row['cell']}: "
                        f"{self.row['why']}")
        if self.status in ("fail", "expected_fail"):
            pytest.fail(self.message(), pytrace=False)


@dataclass
class Missing:
    reason: str
    on_missing: str

    def check(self) -> None:
        if self.on_missing == "fail":
            pytest.fail(self.reason, pytrace=False)
        pytest.skip(self.reason)


def _fmt(x: Any) -> str:
    return shown(x, ".4g")


def _globs(v) -> tuple[str, ...]:
    if v is None:
        return ()
    return (v,) if isinstance(v, str) else tuple(v)


def rule_selected(rule, sel: dict) -> bool:
    """Does a rule match a selector {ids, metrics, tables, exclude: [selectors]}?"""
    for key, attr in (("ids", "id"), ("metrics", "metric"), ("tables", "table")):
        pats = _globs(sel.get(key))
        if pats and not any(fnmatch.fnmatchcase(getattr(rule, attr), p) for p in pats):
            return False
    return not any(rule_selected(rule, ex) for ex in sel.get("exclude", ()))


def _short(model: str) -> str:
    return model


def verdict_params(session, selector: dict) -> list:
    params = []
    for model in session.settings.models:        # the baseline is only gated against
        run = session.run(model)
        if isinstance(run, Unavailable):
            params.append(pytest.param(Missing(run.reason, session.settings.on_missing),
                                       id=f"{_short(model)}-no-run"))
            continue
        rules = [r for r in session.rules(model).rules if rule_selected(r, selector)]
        table = run.verdicts
        multi_rule = len(rules) > 1
        for rule in rules:
            for _, row in table[table["rule"] == rule.id].iterrows():
                v = Verdict(model, row.to_dict(), rule, table, session.settings.on_missing)
                pid = "-".join(x for x in (_short(model), rule.id if multi_rule else "",
                                           str(row["cell"])) if x)
                marks = []
                reason = fill_reason(rule.expected_fail_reason(str(row["cell"])), row.to_dict())
                if reason and row["status"] != "not_evaluable":
                    marks.append(pytest.mark.xfail(strict=True, reason=reason))
                params.append(pytest.param(v, id=pid, marks=marks))
    if not params:
        params.append(pytest.param(Missing("no decision rule selected by this test "
                                           f"({selector}) in the thresholds", "skip"),
                                   id="no-rule"))
    return params


@dataclass
class TableParam:
    model: str
    name: str
    table: Any

    def check(self) -> None:
        """Nothing to skip: the table exists."""


def table_params(session, names: tuple[str, ...], stored: Sequence[str] = ()) -> list:
    """One drift test per model and table, of id ``<model>-<table>`` (as its snapshot
    file names it: :func:`file_safe`), ``<model>-<table>-<qualifier>`` where the table's
    benchmark names the run's snapshots further
    (:meth:`~fairness_tests.pipeline.benchmark.Benchmark.drift_qualifier`: a team's
    benchmark file, by its name). ``stored``: the ids of the test's stored snapshots; those
    of another qualifier of a table whose benchmark reads a benchmark file (another
    team's file, or every file's when the run has none) are skipped tests of their own id:
    kept, neither compared with this run's table nor reported unused."""
    owners = {t: b for b in reversed(benchmarks()) for t in b.drift_tables}
    params = []
    for model in session.settings.models:
        run = session.run(model)
        if isinstance(run, Unavailable):
            params.append(pytest.param(Missing(run.reason, session.settings.on_missing),
                                       id=f"{_short(model)}-no-run"))
            continue
        for n in names:
            b = owners.get(n)
            base = file_safe(f"{_short(model)}-{n}")
            qualifier = file_safe(b.drift_qualifier(run.metadata)) if b is not None else ""
            pid = f"{base}-{qualifier}" if qualifier else base
            others = sorted(x for x in stored if x.startswith(f"{base}-") and x != pid) \
                if b is not None and b.reads_benchmark_file else []
            # a table the run lacks (its benchmark was not asked) is a skipped test of the
            # same id: syrupy then keeps its snapshot (a snapshot of a test that ran in no
            # form is "unused": it fails the session and --snapshot-update deletes it)
            if n in run.tables:
                params.append(pytest.param(TableParam(model, n, run.tables[n]), id=pid))
            elif qualifier or not others:
                params.append(pytest.param(Missing(
                    f"the run of {model} has no table {n} (its benchmark was not asked, or "
                    "made no such table): its snapshot is kept, not checked", "skip"), id=pid))
            params += [pytest.param(Missing(
                f"{n} of {model}: the snapshot of another benchmark file "
                f"({x[len(base) + 1:]}) is kept, not checked"
                + (f" (this run's: {qualifier})" if qualifier else ""), "skip"), id=x)
                for x in others]
    return params


#: what syrupy's single-file snapshots leave out of a file name (besides control and
#: other category-C characters)
_NOT_IN_FILE_NAMES = set('\\/?*:|"<>')


def file_safe(test_id: str) -> str:
    """A drift test's id as its snapshot file names it (``embedded:gemma-3-270m-bbq`` ->
    ``embeddedgemma-3-270m-bbq``): syrupy finds the file of a test that did not assert
    (a skipped one) by the test's id unchanged, so an id with a ``:`` or ``/`` (a model
    id's) would leave that file unused."""
    return "".join(c for c in test_id if c not in _NOT_IN_FILE_NAMES
                   and not unicodedata.category(c).startswith("C"))


@dataclass
class GateRow:
    baseline: str
    candidate: str
    row: dict

    def check(self) -> None:
        """Pass, fail with the comparison, skip a harm cell that is not evaluable, and
        fail a non-inferiority cell that is not evaluable (not shown: its note says why)."""
        r = self.row
        if r["verdict"] == "not_evaluable":
            pytest.skip(f"gate {r['metric']} {r['cell']}: not evaluable ({r.get('note', '')})")
        if r["verdict"] == "fail" and not _finite(r["p_value"]):
            pytest.fail(f"gate {r['metric']} {r['cell']}: candidate {self.candidate} against "
                        f"baseline {self.baseline}: {r.get('note', '')}", pytrace=False)
        if r["verdict"] == "fail":
            worse = "lower" if r["better"] == "higher" else "higher"
            why = ("beyond the margin" if r["mode"] == "harm"
                   else "or not shown to be within the margin (non-inferiority)")
            pytest.fail(
                f"gate {r['metric']} {r['cell']}: candidate {self.candidate} is {worse} than "
                f"baseline {self.baseline} {why}\n"
                f"  baseline {_fmt(r['baseline'])}, candidate {_fmt(r['candidate'])}, "
                f"delta {_fmt(r['delta'])} (paired 95% CI {_fmt(r['ci_low'])} .. "
                f"{_fmt(r['ci_high'])}, n={r['n']} items), margin {r['margin']:g}, "
                f"p={r['p_value']:.3g} (Holm-adjusted {r['p_adjusted']:.3g}; {r['test']})",
                pytrace=False)


def gate_params(session) -> list:
    s = session.settings
    if not s.baseline:
        return [pytest.param(Missing("no --fairness-baseline-model given: the upgrade gate is off",
                                     "skip"), id="no-baseline")]
    params = []
    if not [m for m in s.models if m != s.baseline]:
        return [pytest.param(Missing(f"every --fairness-model is the baseline {s.baseline}: "
                                     "nothing to gate", "skip"), id="candidate-is-baseline")]
    for cand, report in session.gate().items():
        if isinstance(report, Unavailable):
            params.append(pytest.param(Missing(report.reason, s.on_missing),
                                       id=f"{cand}-no-run"))
            continue
        table = report.table
        for _, r in table.iterrows():
            params.append(pytest.param(GateRow(s.baseline, cand, r.to_dict()),
                                       id=f"{cand}-vs-{s.baseline}-{r['metric']}-{r['cell']}"))
        if table.empty:
            params.append(pytest.param(Missing(   # the CLI's refusal (exit 2): a failure
                f"gate {cand} vs {s.baseline}: " + "; ".join(report.refusals), "fail"),
                id=f"{cand}-no-records"))
        elif report.nothing_compared:      # the CLI's exit 5: never green having compared
            params.append(pytest.param(    # nothing, whatever the cells' modes
                Missing(f"gate {cand} vs {s.baseline}: {report.summary()}", "fail"),
                id=f"{cand}-vs-{s.baseline}-nothing-compared"))
    return params


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)
