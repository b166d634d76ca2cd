"""Tables of several scorers of the same generations (``--scorers published,strict,judge``).

- ``generative_scorers``: every scorer's per-slice table (:func:`~.generative.slice_table`)
  stacked, with a ``scorer`` column in front (rules can scope by scorer);
- ``generative_scorer_cells``: every scorer's protocol cells
  (:func:`~.generative_tables.protocol_cells`) stacked the same way;
- ``generative_cells_<scorer>``: the protocol cells of each scorer but the first (the
  verdicts that flip with the scorer are evaluated on them);
- ``scorer_agreement``: for each pair of scorers (in the order given) and each label both
  give, overall (``slice = "all"``) and per slice: the confusion counts ``n11, n10, n01,
  n00`` and the metrics ``raw_agreement`` and ``kappa`` (Cohen's) with their bootstrap
  intervals (:mod:`fairness_tests.stats.agreement`; prompts resampled as clusters unless
  ``cluster="row"``). Rows a scorer left unscored (NaN: error rows, unjudged rows) are
  left out of that pair.

Rows of every scored table are the same records in the same order (one scorer each).
"""
from __future__ import annotations

from itertools import combinations
from typing import Any

import pandas as pd

from fairness_tests.benchmarks.generative import metrics as G
from fairness_tests.benchmarks.generative.schema import GenerativeCluster
from fairness_tests.benchmarks.generative.tables import protocol_cells
from fairness_tests.stats.agreement import agreement
from fairness_tests.stats.bootstrap import (
    DEFAULT_N_BOOT,
    DEFAULT_SEED,
    METRIC_COLUMNS,
    metric_row,
    rate_table,
)

AGREEMENT_CELLS = ["scorer_a", "scorer_b", "label", "slice"]
COUNT_COLUMNS = ["n11", "n10", "n01", "n00"]
AGREEMENT_COLUMNS = [*AGREEMENT_CELLS, *METRIC_COLUMNS, *COUNT_COLUMNS]


def agreement_table(scored: dict[str, pd.DataFrame], labels: dict[str, tuple[str, ...]],
                    n_boot: int = DEFAULT_N_BOOT, seed: int = DEFAULT_SEED,
                    cluster: GenerativeCluster = "prompt") -> pd.DataFrame:
    """The ``scorer_agreement`` table (see the module docstring)."""
    rows = []
    names = list(scored)
    for a, b in combinations(names, 2):
        shared = [x for x in labels[a] if x in labels[b]]
        da = G.with_cells(scored[a])
        db = scored[b]
        for label in shared:
            parts = [("all", da.index)] + [(s, g.index) for s, g in
                                            da.groupby("slice", sort=True)]
            for sl, idx in parts:
                clusters = da.loc[idx, "prompt"].to_numpy() if cluster == "prompt" else None
                ag = agreement(da.loc[idx, label].to_numpy(dtype=float),
                               db.loc[idx, label].to_numpy(dtype=float),
                               clusters, n_boot, seed)
                cell: dict[str, Any] = {"scorer_a": a, "scorer_b": b, "label": label, "slice": sl}
                counts = dict(zip(COUNT_COLUMNS, (ag.n11, ag.n10, ag.n01, ag.n00), strict=True))
                note = "" if ag.n else "no row scored by both"
                rows.append({**metric_row("raw_agreement", ag.raw, n=ag.n, note=note, **cell),
                             **counts})
                rows.append({**metric_row("kappa", ag.kappa, n=ag.n, note=note, **cell),
                             **counts})
    return pd.DataFrame(rows, columns=AGREEMENT_COLUMNS)


def scorer_tables(scored: dict[str, pd.DataFrame], labels: dict[str, tuple[str, ...]],
                  n_boot: int = DEFAULT_N_BOOT, seed: int = DEFAULT_SEED,
                  cluster: GenerativeCluster = "prompt") -> dict[str, pd.DataFrame]:
    """Every table of the module docstring, for scorers ``scored`` (name -> scored
    records, the first is the run's primary scorer) giving ``labels``."""
    by_slice, cells = [], []
    out: dict[str, pd.DataFrame] = {}
    for i, (name, df) in enumerate(scored.items()):
        d = G.with_cells(df)
        extra = [x for x in labels[name] if x not in G.METRICS]
        t = G.slice_table(d, (), n_boot=n_boot, seed=seed, cluster=cluster)
        if extra:
            ok = d[d["status"] != "error"]
            from_extra = rate_table(ok, ["slice"], extra, clusters=None if cluster == "row"
                                      else "prompt", n_boot=n_boot, seed=seed)
            t = pd.concat([t, from_extra[t.columns]], ignore_index=True)
        by_slice.append(t.assign(scorer=name))
        c = protocol_cells(d, n_boot=n_boot, seed=seed, cluster=cluster)
        cells.append(c.assign(scorer=name))
        if i:
            out[f"generative_cells_{name}"] = c
    out["generative_scorers"] = _front(pd.concat(by_slice, ignore_index=True))
    out["generative_scorer_cells"] = _front(pd.concat(cells, ignore_index=True))
    if len(scored) > 1:
        out["scorer_agreement"] = agreement_table(scored, labels, n_boot=n_boot, seed=seed,
                                                  cluster=cluster)
    return out


def _front(t: pd.DataFrame) -> pd.DataFrame:
    """``scorer`` as the first column."""
    return t[["scorer", *[c for c in t.columns if c != "scorer"]]]
