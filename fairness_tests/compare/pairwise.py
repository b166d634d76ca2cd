"""Pairwise comparisons between models and a ranking per metric that admits its
uncertainty, both on the items (generations) the models share.

Statistics are the gate's (:mod:`fairness_tests.pipeline.gate`, :mod:`fairness_tests.metrics.gate`):
the same per-item frames of the run records, the same metric definitions (accuracy,
|s_DIS|, |s_AMB|, |Acc_reinf - Acc_counter|, SF, smoothed DF, invalid rate per
dataset x context; position bias; mean MFAA% and GTC%; worst-slice stereotype and
demeaning rate and refusal gap per prompt family; slice disparity and refusal gap
overall), the same paired cluster bootstrap (BBQ templates, generative prompts; one
multiplicity matrix for both models) and the same tests, made two-sided:

- for each pair (A, B) and cell, ``delta = f(B) - f(A)`` with its paired 95% CI; the
  gate's one-sided p-value ``p1`` of "B is no worse than A" at margin 0 (accuracy: the
  score test on the discordant items, McNemar's at margin 0, variance times the design
  effect; other metrics: ``z = delta / se`` with ``se`` the paired bootstrap's)
  gives the two-sided ``p = min(1, 2 min(p1, 1 - p1))`` (1 when delta = 0 exactly);
- Holm's procedure over the whole family (every pair x metric x cell); a pair is
  *separated* in a cell when its adjusted p < alpha, and the better model is then
  named; otherwise "not separated".

Ranking per metric x cell: a model's *rank interval* is ``[1 + a, N - b]`` with
``a`` (``b``) the number of models separated from it and better (worse) and N the
models with a defined value in the cell: the joint confidence set for ranks of Klein,
Wright & Wieczorek (2020) obtained by inverting the Holm-adjusted paired tests, so it
holds simultaneously for every model, metric and cell at 1 - alpha. The *rank* is its
lower end: models the data cannot separate share a rank.

(Percentiles of each model's rank over bootstrap resamples were not used: for
max-type metrics (SF, DF, worst-slice rate) the plug-in value is biased upward on
every resample, so a model whose value is 0 always ranks first and the interval is
narrow where no test separates the models.)
"""
from __future__ import annotations

import math
from itertools import combinations
from typing import Any, Iterable

import numpy as np
import pandas as pd

from fairness_tests.compare.models import Entry
from fairness_tests.metrics import gate as gm
from fairness_tests.pipeline import gate as G
from fairness_tests.stats.bootstrap import DEFAULT_N_BOOT, DEFAULT_SEED
from fairness_tests.stats.significance import holm

PAIR_COLUMNS = ["metric", "cell", "model_a", "model_b", "value_a", "value_b", "delta",
                "ci_low", "ci_high", "n", "n_clusters", "better", "test", "p_value",
                "p_adjusted", "separated", "verdict", "note"]
RANK_COLUMNS = ["metric", "cell", "model", "value", "better", "rank", "rank_low", "rank_high",
                "n", "n_models"]
ALPHA = 0.05
NAN = float("nan")


def two_sided(p_one_sided: float, delta: float) -> float:
    """Two-sided p-value from the gate's one-sided one (its null at margin 0):
    ``min(1, 2 min(p1, 1 - p1))``, and 1 when the difference is exactly 0 (also when
    it is known without error, se = 0, where p1 is 0 or 1 by construction)."""
    if p_one_sided is None or not np.isfinite(p_one_sided) or not np.isfinite(delta):
        return NAN
    if delta == 0:
        return 1.0
    return float(min(1.0, 2.0 * min(p_one_sided, 1.0 - p_one_sided)))


def adjust(p_values) -> np.ndarray:
    """THE multiplicity correction of the comparison family: Holm's (the gate's)."""
    return holm(p_values)


# ---------------------------------------------------------------- the gate's parts

def _frames(entries: list[Entry], g: G.Gated) -> dict[str, pd.DataFrame]:
    """name -> the model's per-item frame of one gate part (models without records of
    its family, or with an empty frame, are left out)."""
    out = {}
    for e in entries:
        run = e.run(g.family.name)
        rec = None if run is None else run.records.get(g.family.records)
        if rec is None or not len(rec):
            continue
        f = g.part.frame(rec)
        if g.part.columns is not None and len(f):
            f = f[[c for c in g.part.columns if c in f.columns]]
        if len(f):
            out[e.name] = f.copy()
    return out


def _zero_margin(metric, key) -> gm.GateSetting:
    return gm.GateSetting("harm", 0.0)


# ---------------------------------------------------------------- pairwise

def pairwise(entries: list[Entry], *, n_boot: int = DEFAULT_N_BOOT, seed: int = DEFAULT_SEED,
             alpha: float = ALPHA, cluster: dict[str, str] | None = None) -> pd.DataFrame:
    """One row per (pair, metric, cell): :data:`PAIR_COLUMNS` (see the module docstring)."""
    parts = []
    order = {e.name: i for i, e in enumerate(entries)}
    for g in G.gated_parts(cluster):
        frames = _frames(entries, g)
        metrics = g.part.metrics()
        for a, b in combinations(sorted(frames, key=order.__getitem__), 2):
            t = gm.gate_table(frames[a], frames[b], list(g.part.key), list(g.part.by), metrics,
                              _zero_margin, g.cluster, list(g.part.carry), n_boot=n_boot,
                              seed=seed)
            if not len(t):
                continue
            parts.append(pd.DataFrame({
                "metric": t["metric"], "cell": t["cell"], "model_a": a, "model_b": b,
                "value_a": t["baseline"], "value_b": t["candidate"], "delta": t["delta"],
                "ci_low": t["ci_low"], "ci_high": t["ci_high"], "n": t["n"],
                "n_clusters": t["n_clusters"], "better": t["better"], "test": t["test"],
                "p_value": [two_sided(p, d)
                            for p, d in zip(t["p_value"], t["delta"], strict=True)],
                "note": t["note"]}))
    if not parts:
        return pd.DataFrame(columns=PAIR_COLUMNS)
    out = pd.concat(parts, ignore_index=True)
    out["p_adjusted"] = adjust(out["p_value"].to_numpy(float))
    out["separated"] = out["p_adjusted"] < alpha
    out["verdict"] = [_verdict(r) for r in out.itertuples(index=False)]
    return out[PAIR_COLUMNS]


def _verdict(r) -> str:
    if not np.isfinite(r.p_adjusted) or not np.isfinite(r.delta):
        return "not evaluable"
    w = better_of(r.model_a, r.model_b, r.delta, r.separated, r.better == "higher")
    return "not separated" if w is None else f"{w} better"


def better_of(a: str, b: str, delta: float, separated: bool, higher: bool) -> str | None:
    """The better of models a and b (delta = b - a) when they are separated, else None."""
    if not separated or not math.isfinite(float(delta)) or delta == 0:
        return None
    return b if (delta > 0 if higher else delta < 0) else a


# ---------------------------------------------------------------- ranking

def ranking(pairs: pd.DataFrame) -> pd.DataFrame:
    """One row per (metric, cell, model): :data:`RANK_COLUMNS`. The rank interval of a
    model is ``[1 + #models separated from it and better, N - #models separated from it
    and worse]`` over the N models with a defined value in the cell (the joint rank
    confidence set of Klein, Wright & Wieczorek 2020, from the Holm-adjusted paired
    tests: simultaneous over the whole family); ``rank`` is its lower end, so models
    the data cannot separate share a rank."""
    rows = []
    if not len(pairs):
        return pd.DataFrame(columns=RANK_COLUMNS)
    for (metric, cell), g in pairs.groupby(["metric", "cell"], sort=False):
        values: dict[str, float] = {}
        pair_rows: Iterable[Any] = g.itertuples(index=False)
        for r in pair_rows:
            values.setdefault(r.model_a, float(r.value_a))
            values.setdefault(r.model_b, float(r.value_b))
        ranked = [m for m, v in values.items() if np.isfinite(v)]
        higher = g["better"].iloc[0] == "higher"
        for name, v in values.items():
            if name not in ranked:
                rows.append({"metric": metric, "cell": cell, "model": name, "value": v,
                             "better": g["better"].iloc[0], "rank": NAN, "rank_low": NAN,
                             "rank_high": NAN, "n": int(g["n"].max()), "n_models": len(ranked)})
                continue
            above = sum(_winner(g, o, name, higher) == o for o in ranked if o != name)
            below = sum(_winner(g, o, name, higher) == name for o in ranked if o != name)
            rows.append({"metric": metric, "cell": cell, "model": name, "value": v,
                         "better": g["better"].iloc[0], "rank": float(1 + above),
                         "rank_low": float(1 + above), "rank_high": float(len(ranked) - below),
                         "n": int(g["n"].max()), "n_models": len(ranked)})
    return pd.DataFrame(rows, columns=RANK_COLUMNS)


def _winner(g: pd.DataFrame, x: str, y: str, higher: bool) -> str | None:
    """The better of models x and y in this cell when they are separated, else None."""
    r = g[((g["model_a"] == x) & (g["model_b"] == y)) | ((g["model_a"] == y) & (g["model_b"] == x))]
    if not len(r):
        return None
    r = r.iloc[0]
    return better_of(r["model_a"], r["model_b"], r["delta"], bool(r["separated"]), higher)
