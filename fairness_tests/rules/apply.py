"""A run's metric tables + the rules -> every verdict of the run, in one place.

:func:`apply_rules` is what the audit, the score commands and the pytest plugin call
(the plugin with the thresholds the user named, on a saved run too), so the verdict
table, the verdicts per protocol cell, protocol sensitivity and the verdicts that flip
with the rubric always come from the same rule objects and the same engine
(:func:`fairness_tests.rules.evaluate.evaluate`).

Tables it adds (when the run has the protocol-cell table a benchmark declares,
:class:`fairness_tests.rules.protocol.ProtocolCells`; the generative audit's):

- ``protocol_verdicts``: every rule across slices per protocol cell;
- ``protocol_sensitivity``: per rule, whether the verdict depends on the protocol
  beyond noise (:func:`fairness_tests.rules.protocol.protocol_dependence`), with the
  dominant source of spread across each declared cell kind (families and decoding
  regimes: :func:`fairness_tests.metrics.spread.spread_decomposition`);
- ``protocol_spread``: that decomposition per rule and cell kind;
- ``seed_verdicts`` / ``seed_spread``: the same rules per seed, and their range;
- ``rubric_flips``: protocol-cell verdicts whose status differs under the second rubric;
- ``scorer_flips`` (a run with ``--scorers``): the same for every scorer but the first,
  one row per flipped (rule, cell, scorer): ``scorer_a`` (the run's own), ``scorer_b``,
  ``value_a``, ``value_b``, ``status_a``, ``status_b``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, Sequence, runtime_checkable

import pandas as pd

from fairness_tests.core.paths import display_path
from fairness_tests.metrics.spread import spread_decomposition
from fairness_tests.rules.evaluate import evaluate
from fairness_tests.rules.protocol import (
    ProtocolCells,
    declared_cells,
    flipped_verdicts,
    protocol_dependence,
    protocol_rules,
    seed_spread,
)
from fairness_tests.rules.thresholds import RuleSet

DERIVED_TABLES = ("protocol_verdicts", "protocol_sensitivity", "protocol_spread",
                  "seed_verdicts", "seed_spread", "rubric_flips", "scorer_flips")
FLIP_COLUMNS = ["rule", "cell", "scorer_a", "scorer_b", "value_a", "value_b", "status_a",
                "status_b"]


@dataclass
class RuleOutcome:
    verdicts: pd.DataFrame
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)


def apply_rules(tables: Mapping[str, pd.DataFrame], rules: RuleSet,
                rubrics: tuple[str, str] | None = None,
                scorers: tuple[str, ...] = (),
                cells: Sequence[ProtocolCells] | None = None,
                asked: Sequence[str] = ()) -> RuleOutcome:
    """Evaluate ``rules`` on a run's metric tables. ``rubrics``: (primary, compared)
    rubric names when the run scored its generations with two rubrics; ``scorers``: the
    scorers of a ``--scorers`` run, the run's own first; ``cells``: the protocol cells
    to evaluate the rules in (default: every registered benchmark's,
    :func:`~fairness_tests.rules.protocol.declared_cells`; the first the run has);
    ``asked``: the benchmarks the run asked (a benchmark's own rule whose table the run
    lacks is not evaluable for those, absent for the others:
    :func:`~fairness_tests.rules.evaluate.evaluate`)."""
    tables = {k: v for k, v in tables.items() if k not in DERIVED_TABLES}
    out = RuleOutcome(verdicts=evaluate(tables, rules, asked))
    spec = next((c for c in (declared_cells() if cells is None else cells)
                 if c.table in tables), None)
    if spec is None:
        return out
    prules = protocol_rules(rules.rules, spec)
    cell_verdicts = evaluate(tables, prules)
    out.tables["protocol_verdicts"] = cell_verdicts
    spread = []
    for rule in prules:
        for kind, name in spec.spread:
            t = tables.get(name)
            if t is None or t[kind].nunique() < 2:
                continue
            sub = t[t["metric"] == rule.metric][[kind, spec.across, "value"]]
            spread.append({"rule": rule.id, "cell_kind": kind,
                           **spread_decomposition(sub, kind, spec.across)})
    dependence = protocol_dependence(cell_verdicts)
    spread_t = pd.DataFrame(spread)
    if len(spread_t):
        dominant = (spread_t.pivot_table(index="rule", columns="cell_kind", values="dominant",
                                         aggfunc="first")
                    .add_prefix("dominant_across_").reset_index())
        dominant.columns.name = None
        dependence = dependence.merge(dominant, on="rule", how="left")
    out.tables["protocol_sensitivity"] = dependence
    out.tables["protocol_spread"] = spread_t
    if spec.seeds and spec.seeds in tables:
        sv = evaluate(tables, protocol_rules(rules.rules, spec, table=spec.seeds))
        out.tables["seed_verdicts"] = sv
        out.tables["seed_spread"] = seed_spread(sv)
    if rubrics and f"{spec.table}_{rubrics[1]}" in tables:
        other = evaluate(tables, protocol_rules(rules.rules, spec,
                                                table=f"{spec.table}_{rubrics[1]}"))
        out.tables["rubric_flips"] = flipped_verdicts(cell_verdicts, other, rubrics)
    if len(scorers) > 1:
        out.tables["scorer_flips"] = scorer_flips(tables, rules, cell_verdicts, scorers, spec)
    return out


def scorer_flips(tables: Mapping[str, pd.DataFrame], rules: RuleSet,
                 cell_verdicts: pd.DataFrame, scorers: tuple[str, ...],
                 cells: ProtocolCells) -> pd.DataFrame:
    """Protocol-cell verdicts that differ between the first scorer and each other one."""
    parts = []
    first = scorers[0]
    for name in scorers[1:]:
        table = f"{cells.table}_{name}"
        if table not in tables:
            continue
        other = evaluate(tables, protocol_rules(rules.rules, cells, table=table))
        f = flipped_verdicts(cell_verdicts, other, ("a", "b"))
        parts.append(f.assign(scorer_a=first, scorer_b=name))
    return (pd.concat(parts, ignore_index=True)[FLIP_COLUMNS] if parts
            else pd.DataFrame(columns=FLIP_COLUMNS))


@runtime_checkable
class ScoredInfo(Protocol):
    """A benchmark's run info that records how its generations were scored: the rubric,
    the second rubric of scorer sensitivity (None: none), the ``--scorers`` run."""
    rubric: str
    compare_rubric: str | None
    scorers: list[dict]


def apply_to_run(run: Any, rules: RuleSet) -> None:   # a RunResult (the run layer, above)
    """Set a run's verdicts and rule-derived tables from ``rules`` (the thresholds the
    user named), replacing any computed with other rules; the run's metadata names
    the threshold files. The rubric and scorer flips follow the first of the run's infos
    that records how generations were scored (:class:`ScoredInfo`)."""
    scored = next((i for i in run.metadata.infos.values() if isinstance(i, ScoredInfo)),
                  None)
    rubrics = ((scored.rubric, scored.compare_rubric) if scored and scored.compare_rubric
               else None)
    scorers = tuple(s["name"] for s in scored.scorers) if scored else ()
    outcome = apply_rules(run.tables, rules, rubrics, scorers,
                          asked=list(run.metadata.config.get("benchmarks") or ()))
    run.tables = {k: v for k, v in run.tables.items() if k not in DERIVED_TABLES}
    run.tables.update(outcome.tables)
    run.verdicts = outcome.verdicts
    run.metadata.thresholds = [display_path(f) for f in rules.files_used(run.tables)]
