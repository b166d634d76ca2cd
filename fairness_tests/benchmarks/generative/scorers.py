"""Scoring the generative audit's generations with the scorers a configuration names
(``--scorers``), for the audit and ``generative score`` alike: every scorer's scores
(:func:`fairness_tests.scoring.registry.score_with`, with the judge and classifier of
:func:`fairness_tests.pipeline.scorers.scoring_context`), the one generative table
builder on the first scorer (with the second for scorer sensitivity) and, when
``--scorers`` is given, the several-scorers tables
(:mod:`fairness_tests.benchmarks.generative.scorer_tables`: a ``scorer`` column, agreement).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import pandas as pd

from fairness_tests.benchmarks.generative.scorer_tables import scorer_tables
from fairness_tests.benchmarks.generative.tables import generative_tables
from fairness_tests.models.store.store import ResponseStore
from fairness_tests.pipeline.scorers import scoring_context
from fairness_tests.scoring.registry import Scored, score_with, scorer_infos
from fairness_tests.scoring.rubric import BUILTIN, Rubric, load_rubric


@dataclass
class ScoredGenerations:
    """Every scorer's output (``by``, in order), the run's primary scorer (the first),
    the rubric objects the run metadata names (``rubric``, ``other``) and the tables."""
    by: dict[str, Scored]
    rubric: Rubric
    other: Rubric | None
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)

    @property
    def primary(self) -> Scored:
        return next(iter(self.by.values()))

    def scorer_infos(self) -> list[dict[str, Any]]:
        """What the card names of each scorer (name first)."""
        return scorer_infos(self.by)

    def incomplete(self) -> str | None:
        """The judge's note when any of its requests ended in an error (the run is
        then incomplete: exit 6), else None."""
        for s in self.by.values():
            if s.info.get("kind") == "judge" and s.info.get("failed"):
                return next(n for n in s.info["notes"] if n.startswith("incomplete:"))
        return None


def _as_rubric(s: Scored) -> Rubric:
    """The lexical rubric a scorer used; for a model-based scorer a stand-in naming it
    (semantics = its kind), so the run metadata names every scorer alike."""
    if s.info.get("kind") == "lexical":
        name = s.info.get("rubric_file") or s.info["rubric"]
        return load_rubric(s.info["rubric"] if s.info["rubric"] in BUILTIN else name)
    return Rubric(s.name, str(s.info.get("kind")), {})


def score_generations(records: pd.DataFrame, c: Any, store: ResponseStore | None, *,
                      progress: bool | None = False, live: bool = True,
                      stage: Callable[[str], None] | None = None) -> ScoredGenerations:
    """Score ``records`` with the scorers of ``c`` (a configuration with
    :class:`~.config.RubricOptions`, :class:`~.config.ScorerOptions` and the stats
    options) and build the tables (see the module docstring); ``stage``: called with a
    progress line between the scoring and the tables (the audit's stage lines)."""
    compare = None if c.compare_rubric in (None, "none") else c.compare_rubric
    names = c.scorer_list(c.rubric, compare)
    by = score_with(names, records, scoring_context(c, names, store, progress, live))
    scored = list(by.values())
    rubric = _as_rubric(scored[0])
    other = _as_rubric(scored[1]) if len(scored) > 1 else None
    if other is not None and other.name == rubric.name:
        other = None
    if stage is not None:
        stage(f"generative: {len(records)} generations scored by {', '.join(by)}; "
              "building the tables")
    kw = dict(n_boot=c.n_boot, seed=c.seed, cluster=c.gen_cluster)
    tables = generative_tables(scored[0].scored, rubric=rubric.name,
                               compare=(other.name, scored[1].scored) if other else None, **kw)
    if c.scorers:
        tables.update(scorer_tables({n: s.scored for n, s in by.items()},
                                    {n: s.labels for n, s in by.items()}, **kw))
    return ScoredGenerations(by, rubric, other, tables)
