"""The several-scorers part of the ``generative score`` JSON (``--scorers`` / ``--scorer``).

Shape::

    {"scorers": [{"name", "kind", "model", "version", "rubric", "prompt", "mode",
                  "unjudged_rate", "usage", "self_consistency", ...}],
     "agreement": [{"scorer_a", "scorer_b", "label", "slice", "n", "n11", "n10", "n01",
                    "n00", "raw_agreement", "raw_agreement_ci": [lo, hi], "kappa",
                    "kappa_ci": [lo, hi]}]}

Agreement is given for every pair of the scorers run and, when the published lexical
rubric is not among them, of each scorer against it (scored for the comparison only),
overall (``slice: "all"``) and per slice
(:mod:`fairness_tests.benchmarks.generative.scorer_tables`).
"""
from __future__ import annotations

from typing import Any

import pandas as pd

from fairness_tests.benchmarks.generative.schema import GenerativeCluster
from fairness_tests.benchmarks.generative.scorer_tables import (
    AGREEMENT_CELLS,
    COUNT_COLUMNS,
    agreement_table,
)
from fairness_tests.core.fmt import json_value
from fairness_tests.scoring.registry import Scored, lexical_scored
from fairness_tests.scoring.rubric import load_rubric


def agreement_rows(table: pd.DataFrame) -> list[dict[str, Any]]:
    """One row per pair x label x slice, raw agreement and kappa side by side."""
    out = []
    for key, g in table.groupby(AGREEMENT_CELLS, sort=False):
        row: dict[str, Any] = dict(zip(AGREEMENT_CELLS, key, strict=True))
        first = g.iloc[0]
        row["n"] = int(first["n"])
        row.update({c: int(first[c]) for c in COUNT_COLUMNS})
        for r in g.itertuples(index=False):
            row[str(r.metric)] = json_value(r.value)
            row[f"{r.metric}_ci"] = [json_value(r.ci_low), json_value(r.ci_high)]
        out.append(row)
    return out


def scorers_report(by: dict[str, Scored], records: pd.DataFrame, *, n_boot: int, seed: int,
                   cluster: GenerativeCluster = "prompt") -> dict[str, Any]:
    """``{"scorers": ..., "agreement": ...}`` (see the module docstring)."""
    infos = [{"name": n, **_jsonable(s.info)} for n, s in by.items()]
    pairs = dict(by)
    if "published" not in pairs:
        pairs["published"] = lexical_scored(records, load_rubric("published"))
    if len(pairs) < 2:
        return {"scorers": infos, "agreement": []}
    t = agreement_table({n: s.scored for n, s in pairs.items()},
                        {n: s.labels for n, s in pairs.items()}, n_boot=n_boot, seed=seed,
                        cluster=cluster)
    return {"scorers": infos, "agreement": agreement_rows(t)}


def _jsonable(value: Any) -> Any:
    """``value`` with NaN as null, recursively."""
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float):
        return json_value(value)
    return value


def label_rates(table: pd.DataFrame, scorer: str, labels: tuple[str, ...]
                ) -> dict[str, dict[str, Any]]:
    """slice -> {label: rate} of ``scorer`` in ``generative_scorers`` (labels that the
    generative metrics do not have: a judge rubric's own)."""
    t = table[(table["scorer"] == scorer) & table["metric"].isin(labels)]
    out: dict[str, dict[str, Any]] = {}
    for r in t.itertuples(index=False):
        out.setdefault(str(r.slice), {})[r.metric] = json_value(r.value)
    return out
