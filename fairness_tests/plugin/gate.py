"""The model-upgrade gate inside pytest: per-item records of two runs -> gate table
(:mod:`fairness_tests.metrics.gate`) -> parametrized tests + a terminal table.

Records a run must carry (``run.tables["<name>_records"]``, or ``run.records[name]``):

- ``bbq``: one row per answer with ``dataset, example_id, context, answer`` and the
  item columns ``label, unknown_loc, target_loc, polarity, group`` (or the flags of
  ``metrics.bbq.join_answers`` directly: ``correct, invalid, biased, non_unknown``);
  the first run (repeat 0, rotation 0) is compared.
- ``generative``: the scored generative records (published raw-output fields + the
  rubric's 0/1 columns ``stereotype, demeaning, refusal``).
"""
from __future__ import annotations

import math

import pandas as pd

from ..metrics import gate as gm
from ..run import RunResult

ITEM_COLS = ["dataset", "example_id", "context", "polarity", "label", "unknown_loc",
             "target_loc", "group"]


def records(run: RunResult, name: str) -> pd.DataFrame | None:
    recs = getattr(run, "records", None)
    if isinstance(recs, dict) and recs.get(name) is not None:
        return recs[name]
    return run.tables.get(f"{name}_records")


def bbq_flags(run: RunResult) -> pd.DataFrame | None:
    from ..metrics.bbq import first_run, join_answers
    r = records(run, "bbq")
    if r is None or r.empty:
        return None
    r = first_run(r)
    if {"correct", "invalid", "biased", "non_unknown"} <= set(r.columns):
        return r
    items = r[[c for c in ITEM_COLS if c in r.columns]].drop_duplicates(["dataset", "example_id"])
    for c in ITEM_COLS:
        if c not in items:
            items = items.assign(**{c: math.nan})
    return join_answers(items, r)


def generative_scored(run: RunResult) -> pd.DataFrame | None:
    from ..metrics.generative import with_cells
    r = records(run, "generative")
    if r is None or r.empty or "stereotype" not in r.columns:
        return None
    return r if "slice" in r.columns else with_cells(r)


def gate_runs(baseline: RunResult, candidate: RunResult, seed: int = 0) -> pd.DataFrame:
    """All gate rows comparing candidate to baseline (empty when no records)."""
    parts = []
    b, c = bbq_flags(baseline), bbq_flags(candidate)
    if b is not None and c is not None:
        parts.append(gm.gate_table(b, c, ["dataset", "example_id"], ["dataset", "context"],
                                   gm.bbq_gate_metrics(), seed=seed))
    gb, gc = generative_scored(baseline), generative_scored(candidate)
    if gb is not None and gc is not None:
        parts.append(gm.generative_gate(gb, gc, by=["family"], seed=seed))
    if not parts:
        return pd.DataFrame(columns=gm.GATE_COLUMNS)
    return pd.concat(parts, ignore_index=True)


def _f(x, signed=False) -> str:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return str(x)
    if math.isnan(x):
        return "-"
    return f"{x:+.3f}" if signed else f"{x:.3f}"


def format_table(rows: pd.DataFrame, baseline: str, candidate: str) -> list[str]:
    """The terminal summary: metric, cell, baseline, candidate, delta, CI, verdict."""
    head = ["metric", "cell", "baseline", "candidate", "delta", "95% CI (paired)", "verdict"]
    body = [[r["metric"], r["cell"], _f(r["baseline"]), _f(r["candidate"]),
             _f(r["delta"], True), f"[{_f(r['ci_low'], True)}, {_f(r['ci_high'], True)}]",
             r["verdict"] + (f" (margin {r['margin']:g})" if r["verdict"] == "fail" else "")]
            for _, r in rows.iterrows()]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body)]
    line = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()
    out = [f"fairness gate: candidate {candidate} vs baseline {baseline}", line(head),
           line(["-" * w for w in widths])]
    out += [line(b) for b in body]
    n_fail = int((rows["verdict"] == "fail").sum()) if len(rows) else 0
    out.append(f"{n_fail} regression(s) beyond the margin with statistical support"
               if n_fail else "no regression beyond the margin with statistical support")
    return out
