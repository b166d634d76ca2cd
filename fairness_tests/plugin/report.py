"""What a pytest session reports beyond pass/fail: JUnit properties of every property
test (value, CI, bound, verdict), the gate's terminal table, the GitHub step summary
(``$GITHUB_STEP_SUMMARY``: the verdict table and the gate table as Markdown) and the
``--fairness-report DIR`` directory (runs, verdicts, gate tables, Fairness Cards)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd

from fairness_tests.core.fmt import shown
from fairness_tests.plugin.parametrize import Verdict
from fairness_tests.plugin.session import Unavailable

ENV_STEP_SUMMARY = "GITHUB_STEP_SUMMARY"
#: where a model's run explorer is written, in the report directory
EXPLORER = "explore/index.html"


def slug(model: str) -> str:
    """A model id as the name of its folder in the report directory."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in model)


def junit_properties(param: Any) -> list[tuple[str, Any]]:
    """``record_property`` pairs of a verdict parameter (they land in the JUnit XML)."""
    if not isinstance(param, Verdict):
        return []
    r = param.row
    return [("fairness_model", param.model), ("fairness_rule", r["rule"]),
            ("fairness_cell", r["cell"]), ("fairness_metric", r["metric"]),
            ("fairness_value", _num(r["value"])), ("fairness_ci_low", _num(r["ci_low"])),
            ("fairness_ci_high", _num(r["ci_high"])), ("fairness_compared", r["compared"]),
            ("fairness_bound", f"{r['op']} {r['bound']}"),
            ("fairness_verdict", r["status"])]


def _num(x: Any) -> str:
    return shown(x, ".6g")


def markdown_table(df: pd.DataFrame, columns: list[str]) -> str:
    head = "| " + " | ".join(columns) + " |"
    sep = "|" + "---|" * len(columns)
    rows = ["| " + " | ".join(_num(r[c]) if isinstance(r[c], float) else str(r[c]).replace(
        "|", "\\|") for c in columns) + " |" for _, r in df.iterrows()]
    return "\n".join([head, sep, *rows])


def step_summary(fs, gate_tables: dict[str, Any]) -> str:
    """The Markdown appended to ``$GITHUB_STEP_SUMMARY``."""
    parts = ["## Fairness verdicts", ""]
    for model in fs.settings.models:
        run = fs.run(model)
        if isinstance(run, Unavailable):
            parts += [f"**{model}**: {run.reason}", ""]
            continue
        v = run.verdicts
        counts = v["status"].value_counts()
        parts += [f"**{model}**: " + ", ".join(f"{counts.get(s, 0)} {s}" for s in
                                                ("pass", "fail", "expected_fail",
                                                 "not_evaluable")), "",
                  markdown_table(v, ["rule", "cell", "value", "ci_low", "ci_high", "op",
                                     "bound", "status"]), ""]
        if fs.settings.report_dir:
            what = "each verdict's items" + (", the gate's changed answers"
                                              if model in gate_tables else "")
            parts += [f"Run explorer ({what}): `{Path(fs.settings.report_dir) / slug(model)}/"
                      f"{EXPLORER}` in the uploaded report: open it in a browser", ""]
    for cand, t in gate_tables.items():
        parts += [f"## Fairness gate: {cand} vs {fs.settings.baseline}", ""]
        if isinstance(t, Unavailable):
            parts += [t.reason, ""]
            continue
        cols = ["metric", "cell", "mode", "baseline", "candidate", "delta", "ci_low", "ci_high",
                "p_value", "p_adjusted", "detectable", "verdict"]
        parts += [markdown_table(t.table, cols), "", t.family, ""]
    return "\n".join(parts) + "\n"


def append_step_summary(fs, gate_tables: dict[str, Any]) -> None:
    path = os.environ.get(ENV_STEP_SUMMARY)
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(step_summary(fs, gate_tables))


def write_report(fs, out: Path, gate_tables: dict[str, Any]) -> None:
    """Runs (with verdicts), the gate tables, a run explorer (``<model>/explore/``: with a
    baseline, the candidate's against it) and a Fairness Card linking it per model and, with two
    or more models, the comparison report (``compare/compare.{md,html,csv}``, the
    same as ``fairness-tests compare`` on the saved runs)."""
    from fairness_tests.card.files import write_cards
    from fairness_tests.compare import write_compare
    from fairness_tests.core.errors import FairnessTestsError
    from fairness_tests.explore.write import bundle, write_explorer
    from fairness_tests.rules.thresholds import load_rules

    out.mkdir(parents=True, exist_ok=True)
    all_verdicts = []
    notes = []
    runs = {}
    for model in fs.models():
        run = fs.run(model)
        name = slug(model)
        if isinstance(run, Unavailable):
            notes.append(f"{model}: {run.reason}")
            continue
        run.save(out / name / "run")
        runs[model] = run
        all_verdicts.append(run.verdicts.assign(model=model))
        g = gate_tables.get(model)
        g = None if g is None or isinstance(g, Unavailable) else g
        base = fs.run(fs.settings.baseline) if g is not None else None
        keys = ([fs.settings.baseline, model] if base is not None
                and not isinstance(base, Unavailable) else [model])
        pair = [fs.run(k) for k in keys]
        rules = [load_rules(fs.settings.audit(k).thresholds, r.metadata.model)
                 for k, r in zip(keys, pair, strict=True)]
        (out / name / "explore").mkdir(parents=True, exist_ok=True)
        try:
            write_explorer(out / name / "explore",
                           bundle(pair, rules, gates=[g] if len(pair) > 1 else None))
        except FairnessTestsError as exc:     # the runs and the card are kept
            notes.append(f"{model}: run explorer not written: {exc}")
        try:
            write_cards(run, out / name / "card", explorer=f"../{EXPLORER}",
                        gate=None if g is None else g.to_dict())
        except FairnessTestsError as exc:     # e.g. a bad user YAML: the runs are kept
            notes.append(f"{model}: card not written: {exc}")
    if all_verdicts:
        pd.concat(all_verdicts).to_csv(out / "verdicts.csv", index=False, float_format="%.10g")
    for cand, t in gate_tables.items():
        if not isinstance(t, Unavailable):
            t.table.to_csv(out / f"gate-{cand.replace('/', '_').replace(':', '_')}.csv",
                           index=False, float_format="%.10g")
    if len(runs) >= 2:
        try:
            first = fs.settings.audit(fs.settings.models[0])
            kw = {"n_boot": first.n_boot, "seed": first.seed}
            write_compare(runs, out / "compare", **kw)
        except FairnessTestsError as exc:   # ProtocolChangeError among them
            notes.append(f"comparison not written: {exc}")
    (out / "NOTES.txt").write_text("\n".join(notes) + ("\n" if notes else ""))
