"""Tables of a ``generate`` outcome: the generations scored by the generative audit's
scorers (:func:`fairness_tests.scoring.registry.score_with`: the rubric, judge and
classifier of ``--rubric`` / ``--scorers``), tabulated by the generative audit's own slice
functions (:mod:`fairness_tests.benchmarks.generative.metrics`), one attribute at a time: the
attribute's value (or, for ``slice``, the intersection) plays the generative audit's
``slice``.

- ``templates_generate_groups`` (attribute, group): every scorer metric per group
  (:func:`~fairness_tests.benchmarks.generative.metrics.slice_table`), intervals clustered by
  template (the ``prompt`` cluster column is the template).
- ``templates_generate_summary`` (attribute, group): ``worst_slice_<m>`` (``group``: the
  worst group), ``disparity_<m>`` (max - min over groups) and ``refusal_gap``
  (:func:`~fairness_tests.benchmarks.generative.metrics.max_over_slices`,
  :func:`~fairness_tests.benchmarks.generative.metrics.refusal_gap`). Their resampling unit is the
  filled prompt (its generations over seeds move together) and their permutation test
  permutes the groups of whole prompts within templates (the generative audit's
  ``frame``): a permutation unit must carry one group, which a template does not.
"""
from __future__ import annotations

import pandas as pd

from fairness_tests.benchmarks.generative import metrics as G
from fairness_tests.stats.bootstrap import DEFAULT_N_BOOT, DEFAULT_SEED, METRIC_COLUMNS

SLICE = "slice"
GROUP_COLUMNS = ["attribute", "group"]


def _as_slices(scored: pd.DataFrame, attribute: str, cluster: str) -> pd.DataFrame:
    """The scored generations with the generative audit's cell columns: ``slice`` = the
    attribute's value, ``prompt`` = ``cluster`` (template or item), ``frame`` = template."""
    return scored.assign(slice=scored[attribute].astype(str), prompt=scored[cluster],
                         frame=scored["template"],
                         is_error=(scored["status"] == "error").astype(float))


def generate_tables(scored: pd.DataFrame, attributes: tuple[str, ...],
                    n_boot: int = DEFAULT_N_BOOT, seed: int = DEFAULT_SEED,
                    unit: str = "template") -> tuple[pd.DataFrame, pd.DataFrame]:
    """(``templates_generate_groups``, ``templates_generate_summary``), every attribute
    in the file's order then ``slice``; ``unit``: the groups table's resampling unit,
    ``template`` or ``item`` (a filled template's generations over seeds)."""
    groups, summary = [], []
    for a in (*attributes, SLICE):
        by_template = _as_slices(scored, a, unit)
        t = G.slice_table(by_template, (), n_boot, seed, "prompt")
        groups.append(t.rename(columns={SLICE: "group"}).assign(attribute=a))
        by_item = _as_slices(scored, a, "item")
        metrics = [m for m in G.METRICS if m in scored]
        worst = G.max_over_slices(by_item, (), metrics, "max", n_boot, seed, "prompt")
        names = G.worst_slice(t, ()).set_index("metric")["slice"]
        worst["group"] = worst["metric"].map(names).fillna("")
        worst["metric"] = "worst_slice_" + worst["metric"]
        disp = G.disparity(by_item, (), metrics, n_boot, seed, "prompt").assign(group="")
        disp["metric"] = "disparity_" + disp["metric"]
        gap = G.refusal_gap(by_item, (), n_boot, seed, "prompt").assign(group="")
        summary.append(pd.concat([worst, disp, gap], ignore_index=True).assign(attribute=a))
    cols = [*GROUP_COLUMNS, *METRIC_COLUMNS]
    return (pd.concat(groups, ignore_index=True)[cols],
            pd.concat(summary, ignore_index=True)[cols])
