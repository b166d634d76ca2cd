"""THE BBQ table builder: items + predictions -> every BBQ metric table of a run.

The audit, ``fairness-tests bbq score``, the gate and the pytest plugin all call
:func:`bbq_tables` (and :func:`bbq_records`), so every entry point gives the same
numbers. What is computed follows from what the predictions hold:

- ``bbq``: the first run (repeat 0, rotation 0) per dataset x context (x polarity):
  accuracy, bias scores, SF, DF, reinforcing/counter accuracy, invalid rate
  (:func:`fairness_tests.benchmarks.bbq.metrics.bbq_metrics`), plus ``position_bias`` and
  ``position_share_<p>`` rows per dataset x context when some items were asked under
  all three rotations (repeat 0) (:func:`~fairness_tests.benchmarks.bbq.metrics.position_bias`);
- ``bbq_groups``: favourable-outcome and invalid rates per intersectional group;
- under ``conventions="bbq-authors"`` the ``bbq`` table follows the BBQ authors'
  analysis (:mod:`fairness_tests.benchmarks.bbq.conventions`: unmatched answers and items
  without a target dropped, "unknown" by the chosen option's tag, a ``proxy`` column
  for name and label items) and ``bbq_groups`` is computed on the same answers;
  position bias and consistency are the same under both conventions;
- ``consistency`` and ``consistency_items``: MFAA / GTC over the VALID answers of the
  items that have MORE THAN ONE repeat at rotation 0 (the consistency sample);
  single-answer items are not consistency data and never enter these tables, and an
  item with fewer than two valid answers does not count in the summary
  (:mod:`fairness_tests.benchmarks.bbq.consistency`). When predictions carry
  ``letter_probs`` (the answer distribution, original option order), the exact
  expected MFAA / GTC / P(flagged) per item and their summaries, and the fit of the
  sampled repeats to the distributions
  (:mod:`fairness_tests.metrics.expected_consistency`).
"""
from __future__ import annotations

from typing import Any, Callable

import pandas as pd

from fairness_tests.benchmarks.bbq import consistency as C
from fairness_tests.benchmarks.bbq import conventions as A
from fairness_tests.benchmarks.bbq import metrics as M
from fairness_tests.metrics import expected_consistency as E
from fairness_tests.metrics.schema import BBQ_LETTER_COLUMNS, BBQ_RECORD_COLUMNS, BBQCluster
from fairness_tests.stats.bootstrap import DEFAULT_N_BOOT, DEFAULT_SEED

ORDER = ["dataset", "example_id", "rotation", "repeat"]


def repeated_items(preds: pd.DataFrame) -> pd.DataFrame:
    """The rotation-0 answers of items answered more than once (the consistency data)."""
    p = preds[preds["rotation"] == 0] if "rotation" in preds else preds
    size = p.groupby(["dataset", "example_id"])["answer"].transform("size")
    return p[size > 1]


def bbq_tables(items: pd.DataFrame, preds: pd.DataFrame, *, n_boot: int = DEFAULT_N_BOOT,
               seed: int = DEFAULT_SEED, concentration: float = M.DEFAULT_CONCENTRATION,
               min_group_n: int = M.DEFAULT_MIN_GROUP_N, cluster: BBQCluster = "template",
               conventions: str = M.PROJECT,
               stage: Callable[[str], None] | None = None) -> dict[str, pd.DataFrame]:
    """Every BBQ metric table the predictions support (see the module docstring).

    ``items``: the filtered items (``protocols.bbq.filter.filter_items``);
    ``preds``: ``dataset, example_id, repeat, rotation, answer`` (answer in the
    original option order, NaN = invalid), one row per (item, repeat, rotation);
    ``cluster``: "template" (resample templates, the default) or "item"; ``stage``:
    called with a progress line after each table group (the audit's stage lines)."""
    kw: dict[str, Any] = dict(n_boot=n_boot, seed=seed, cluster=cluster)
    out: dict[str, pd.DataFrame] = {}
    # one canonical row order, so the tables do not depend on the order the answers
    # arrived in (float sums over repeats are order-sensitive in the last bit)
    preds = preds.sort_values([c for c in ORDER if c in preds], kind="stable",
                              ignore_index=True)
    first = M.first_run(preds)
    if len(first) and conventions == M.BBQ_AUTHORS:
        table = A.authors_bbq_table(items, first, concentration=concentration,
                                    min_group_n=min_group_n, **kw)
        pb = M.position_bias(items, preds[preds["repeat"] == 0], **kw)
        if len(pb):
            pb.insert(3, "proxy", "all")
        out["bbq"] = pd.concat([table, pb], ignore_index=True) if len(pb) else table
        out["bbq_groups"] = M.group_table(A.scored_items(items), first[first["answer"].notna()],
                                          min_group_n=min_group_n, conventions=conventions,
                                          **kw)
    elif len(first):
        table = M.bbq_metrics(items, first, concentration=concentration,
                              min_group_n=min_group_n, **kw)
        pb = M.position_bias(items, preds[preds["repeat"] == 0], **kw)
        out["bbq"] = pd.concat([table, pb], ignore_index=True) if len(pb) else table
        out["bbq_groups"] = M.group_table(items, first, min_group_n=min_group_n, **kw)
    rep = repeated_items(preds)
    if len(rep):
        if stage is not None and "bbq" in out:
            stage(f"bbq: {len(out['bbq'])} + {len(out['bbq_groups'])} rows; consistency: "
                  f"{rep[['dataset', 'example_id']].drop_duplicates().shape[0]} repeated items")
        per_item = C.per_item(items, rep)
        expected = E.expected_items(items, rep)
        if len(expected):
            per_item = per_item.merge(expected, on=["dataset", "example_id"], how="left")
        out["consistency"] = C.consistency_table(per_item, seed=seed)
        out["consistency_items"] = per_item
    return out


def bbq_records(items: pd.DataFrame, preds: pd.DataFrame) -> pd.DataFrame:
    """One row per answer (every repeat and rotation) with the item columns and the
    per-answer flags: what the gate pairs across runs and what ``bbq score`` reads
    back (the predictions of a run directory). When the predictions carry
    ``letter_probs``, its three values are the columns ``letter_p0..letter_p2``
    (original option order, NaN when unknown), so a run directory keeps what the
    expected-consistency statistics were computed from."""
    j = M.join_answers(items, preds)
    out = j[[c for c in BBQ_RECORD_COLUMNS if c in j.columns]].copy()
    if "letter_probs" in j and j["letter_probs"].map(E.has_distribution).any():
        lp = [list(v) if E.has_distribution(v) else [float("nan")] * E.N_OPTIONS
              for v in j["letter_probs"]]
        for k, col in enumerate(BBQ_LETTER_COLUMNS):
            out[col] = [float(v[k]) for v in lp]
    return out.sort_values(ORDER, kind="stable").reset_index(drop=True)


