"""The model-upgrade gate's report (:class:`GateReport`): its table as text, Markdown
and JSON, the family statement, what each cell can detect, and its outcome.

Outcome (:meth:`GateReport.exit_code`, the one rule for ``fairness-tests gate``; the
pytest plugin maps the same facts to tests):

- no row at all (the runs share no protocol with per-item records): 2, a refusal;
- no row *evaluated* (no comparison has a defined delta and p-value, in any mode; e.g.
  every cell holds one template): 5, "nothing compared", with the reasons. The
  non-inferiority cells among them carry the verdict ``fail`` (not shown), but a gate
  that compared nothing says so rather than "a cell fails";
- some row evaluated and some cell fails: 1. A failing cell is a test beyond its
  margin (harm), a test that does not show non-inferiority, or a non-inferiority cell
  that could not be evaluated (:data:`fairness_tests.metrics.gate.NOT_SHOWN`);
- else 0. Harm cells that were not evaluated do not fail, but the summary line always
  says how many comparisons were not evaluated and why.
"""
from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from fairness_tests.core.exits import ExitCode
from fairness_tests.core.fmt import json_value, shown, shown_p
from fairness_tests.core.registry import load
from fairness_tests.metrics import gate as gm
from fairness_tests.pipeline.benchmark import families
from fairness_tests.stats.significance import POWER


@dataclass
class GateReport:
    """The gate's outcome. ``table``: one row per (metric, cell) (``metrics.gate.
    GATE_COLUMNS``); ``family``: the family of comparisons and the method, stated;
    ``refusals``: what was not gated and why; ``warnings``: protocol differences the
    caller allowed. ``baseline``/``candidate``: the runs' model ids (None: a scored run
    whose model was not named); ``baseline_name``/``candidate_name``: what the report
    calls them (the model id, else the run directory)."""
    baseline: str | None
    candidate: str | None
    table: pd.DataFrame
    family: str
    alpha: float
    clusters: dict[str, str]
    refusals: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    baseline_name: str = ""
    candidate_name: str = ""

    def __post_init__(self) -> None:
        self.baseline_name = self.baseline_name or str(self.baseline)
        self.candidate_name = self.candidate_name or str(self.candidate)

    @property
    def failed(self) -> bool:
        return bool((self.table["verdict"] == "fail").any()) if len(self.table) else False

    @property
    def n_evaluated(self) -> int:
        """Comparisons with a defined delta and test (the Holm family)."""
        rows = self.table.itertuples(index=False)
        return sum(gm.evaluated(r) for r in rows) if len(self.table) else 0

    @property
    def nothing_compared(self) -> bool:
        """Rows to gate, and not one of them evaluated."""
        return bool(len(self.table)) and self.n_evaluated == 0

    def exit_code(self) -> ExitCode:
        """2 no row, 5 nothing evaluated, 1 a cell fails, else 0 (module docstring)."""
        if not len(self.table):
            return ExitCode.USAGE
        if self.nothing_compared:
            return ExitCode.NOTHING_EVALUATED
        return ExitCode.RULE_FAILED if self.failed else ExitCode.OK

    def why_not_evaluated(self) -> str:
        """Why the rows without a test have none, per cell: "Race_x_SES/disambig (6):
        1 cluster (question_index), at least 2 needed"."""
        by_cell: dict[str, list[str]] = defaultdict(list)
        for r in self.table.itertuples(index=False):
            if not gm.evaluated(r):
                by_cell[str(r.cell)].append(_reason(str(r.note)))
        return "; ".join(f"{cell} ({len(rs)}): {', '.join(dict.fromkeys(rs))}"
                         for cell, rs in by_cell.items())

    def summary(self) -> str:
        """The outcome in one line: what fails, how many comparisons were not evaluated
        and why; never "no cell fails" alone when nothing was compared."""
        n, k = len(self.table), len(self.table) - self.n_evaluated
        if not n:
            return "nothing to gate"
        verdicts = self.table["verdict"]
        if self.nothing_compared:
            shown_no = int((verdicts == "fail").sum())
            ni = (f"; {shown_no} non-inferiority comparison(s) therefore not shown to be no "
                  "worse") if shown_no else ""
            return (f"nothing compared: none of the {n} comparisons could be evaluated "
                    f"({self.why_not_evaluated()}){ni}")
        n_fail = int((verdicts == "fail").sum())
        unshown = sum(1 for r in self.table.itertuples(index=False)
                      if r.verdict == "fail" and not gm.evaluated(r))
        head = (f"{n_fail} cell(s) fail (Holm-adjusted p < {self.alpha:g}"
                + (f"; {unshown} of them non-inferiority not shown: not evaluable" if unshown
                   else "") + ")") if n_fail else \
            f"no cell fails (Holm-adjusted p < {self.alpha:g} nowhere)"
        tail = (f"; {k} of {n} comparisons not evaluated ({self.why_not_evaluated()})"
                if k else f"; all {n} comparisons evaluated")
        return head + tail

    def detectable_statements(self) -> list[str]:
        """"this gate detects an accuracy drop of at least 3.1 points in
        Race_x_SES/disambig", one line per cell."""
        metrics = gated_metrics() if len(self.table) else {}
        return [detectable_statement(r, metrics.get(r["metric"]))
                for r in self.table.to_dict(orient="records")]

    def to_dict(self) -> dict[str, Any]:
        rows = [{k: json_value(v) for k, v in r.items()}
                for r in self.table.to_dict(orient="records")]
        return {"baseline": self.baseline, "candidate": self.candidate,
                "baseline_name": self.baseline_name, "candidate_name": self.candidate_name,
                "failed": self.failed, "evaluated": self.n_evaluated,
                "not_evaluated": len(self.table) - self.n_evaluated,
                "summary": self.summary(), "alpha": self.alpha, "family": self.family,
                "clusters": self.clusters, "refusals": self.refusals,
                "warnings": self.warnings, "rows": rows,
                "detectable": self.detectable_statements()}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False) + "\n"

    def to_text(self) -> list[str]:
        head = ["metric", "cell", "mode", "baseline", "candidate", "delta", "95% CI (paired)",
                "margin", "p", "p (Holm)", "detects", "verdict"]
        body = [[r["metric"], r["cell"], r["mode"], _f(r["baseline"]), _f(r["candidate"]),
                 _f(r["delta"], signed=True),
                 f"[{_f(r['ci_low'], signed=True)}, {_f(r['ci_high'], signed=True)}]",
                 _f(r["margin"]), _p(r["p_value"]), _p(r["p_adjusted"]),
                 _f(r["detectable"]), r["verdict"]]
                for r in self.table.to_dict(orient="records")]
        widths = [max(len(str(x)) for x in col) for col in zip(head, *body, strict=True)]

        def line(cells):
            return "  ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()
        out = [self.title(), line(head), line(["-" * w for w in widths]),
               *[line(b) for b in body], "", self.family]
        out += [f"refused: {x}" for x in self.refusals]
        out += [f"warning: {x}" for x in self.warnings]
        out.append(self.summary())
        return out

    def title(self) -> str:
        return f"fairness gate: candidate {self.candidate_name} vs baseline {self.baseline_name}"

    def to_markdown(self) -> str:
        cols = ["metric", "cell", "mode", "baseline", "candidate", "delta", "ci_low", "ci_high",
                "margin", "p_value", "p_adjusted", "detectable", "verdict"]
        lines = [f"## Fairness gate: {self.candidate_name} vs {self.baseline_name}", "",
                 "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        for r in self.table.to_dict(orient="records"):
            lines.append("| " + " | ".join(
                _p(r[c]) if c.startswith("p_") else _f(r[c], signed=c == "delta")
                if isinstance(r[c], float) else str(r[c]) for c in cols) + " |")
        lines += ["", self.family, "", self.summary(), ""]
        lines += [f"- {s}" for s in self.detectable_statements()]
        lines += [f"- refused: {x}" for x in self.refusals]
        lines += [f"- warning: {x}" for x in self.warnings]
        return "\n".join(lines) + "\n"


def _reason(note: str) -> str:
    """The short reason of a row without a test: its note's "not evaluable: ..." clause
    (without :data:`~fairness_tests.metrics.gate.NOT_SHOWN`), "in this cell" dropped."""
    note = note.removeprefix(gm.NOT_SHOWN).removeprefix(gm.NOT_EVALUABLE)
    clause = note.split(";")[0].replace(" in this cell", "").strip()
    if clause[:1].isdigit():                 # "1 cluster (question_index)"
        clause += f", at least {gm.MIN_UNITS} needed"
    return clause or "undefined"


def _f(x, signed=False) -> str:
    return shown(x, "+.3f" if signed else ".3f", undefined="-")


def _p(x) -> str:
    return shown_p(x, undefined="-")


def gated_metrics() -> dict[str, gm.GateMetric]:
    """Every gated family's metrics (``Family.gate_parts``), by name, in registry order
    (the first of a name, where two parts declare one)."""
    out: dict[str, gm.GateMetric] = {}
    for spec in families():
        if spec.gated:
            for part in load(spec.impl).gate_parts():
                for m in part.metrics():
                    out.setdefault(m.name, m)
    return out


def detectable_statement(r: dict, metric: gm.GateMetric | None = None) -> str:
    """What the gate row ``r`` can detect, worded by its metric's declaration
    (:meth:`fairness_tests.metrics.gate.GateMetric.wording`; ``metric`` None: the gated
    metric of the row's name, else the generic wording), or why it has no power figure."""
    name = r["metric"]
    if metric is None:
        metric = gated_metrics().get(name)
    what, scale, unit = metric.wording() if metric is not None else gm.generic_wording(name)
    d = r["detectable"]
    if d is None or (isinstance(d, float) and math.isnan(d)):
        note = str(r.get("note") or "")
        if note.startswith((gm.NOT_EVALUABLE, gm.NOT_SHOWN)):    # no test (metrics.gate)
            return f"{r['cell']}: {name}: {'fails: ' if r.get('verdict') == 'fail' else ''}{note}"
        if r.get("verdict") == "not_evaluable":
            return f"{r['cell']}: {name}: {gm.UNDEFINED}"
        if gm.AGREE in note:
            return (f"{r['cell']}: {name}: the runs agree on every item here (for this "
                    "metric), so the observed discordance gives no power figure")
        if r.get("se") == 0:
            return (f"{r['cell']}: {name}: the difference does not vary over the resamples, "
                    "so there is no power figure")
        return f"{r['cell']}: {name}: no worsening is detected with {POWER:.0%} power"
    if d <= 0:
        return (f"{r['cell']}: {name}: fails with {POWER:.0%} probability even without any "
                f"worsening ({r['mode']}, too few items to show the margin)")
    digits = 1 if scale == 100 or unit else 3
    return (f"this gate detects {what} of at least {d * scale:.{digits}f}{unit} in "
            f"{r['cell']} ({POWER:.0%} power)")


def family_statement(table: pd.DataFrame, alpha: float, clusters: dict[str, str],
                     n_boot: int, seed: int) -> str:
    """The family of comparisons and the method, stated: the m rows with a test (the
    rows without one are outside the family, and said so)."""
    m = int(table["p_value"].notna().sum()) if len(table) else 0
    k = len(table) - m
    modes = sorted(set(table["mode"])) if len(table) else []
    outside = (f" The {k} row(s) without a test (not evaluable) are outside the family"
               + ("; in non_inferiority they fail, not shown." if "non_inferiority" in modes
                  else ".")) if k else ""
    units = [f.unit_text(clusters[f.name]) for f in families() if f.name in clusters]
    method = (f"Paired bootstrap ({n_boot} resamples, seed {seed}) resampling "
              f"{' and '.join(units) or 'items'}, the same resamples in both runs. Tests: "
              + ("; ".join(dict.fromkeys(table["test"])) if len(table) else "-") + ".")
    if not m:
        return (f"Family: empty: none of the {k} comparisons above could be evaluated "
                f"({', '.join(modes) or '-'}), so nothing was tested and no correction "
                "applies" + ("; in non_inferiority they fail, not shown. " if
                             "non_inferiority" in modes else ". ") + method)
    return (f"Family: the {m} comparisons above with a test (every gated metric x cell "
            "that could be evaluated), each a one-sided test of its null at its margin "
            f"({', '.join(modes)}); Holm's procedure over all {m} at family-wise alpha = "
            f"{alpha:g}, verdicts on the adjusted p-values; 'detects' = the worsening "
            f"failed with {POWER:.0%} power at alpha / {m}. " + method + outside)


def write_report(report: GateReport, out) -> None:
    """``gate.csv``, ``gate.json`` and ``gate.md`` in ``out``."""
    d = Path(out)
    d.mkdir(parents=True, exist_ok=True)
    report.table.to_csv(d / "gate.csv", index=False, float_format="%.10g")
    (d / "gate.json").write_text(report.to_json(), encoding="utf-8")
    (d / "gate.md").write_text(report.to_markdown(), encoding="utf-8")


