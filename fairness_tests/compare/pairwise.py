"""Pairwise comparisons between models and a ranking per metric that admits its
uncertainty, both on the items (generations) the models share.

Statistics are the gate's (:mod:`fairness_tests.gate`, :mod:`fairness_tests.metrics.gate`):
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
  gives the two-sided ``p = min(1, 2 min(p1, 1 - p1))``;
- Holm's procedure over the whole family (every pair x metric x cell); a pair is
  *separated* in a cell when its adjusted p < alpha, and the better model is then
  named; otherwise "not separated".

Ranking per metric x cell (models sharing the cell's items, aligned on the items all
of them share): every model's statistic on each of the same B resamples ``W`` of
:func:`fairness_tests.stats.multiplicities` (clusters as above), the models ranked in
each resample (1 = best; ties share the lower rank); a model's *rank interval* is the
2.5% and 97.5% quantile of its ranks over the resamples. Its *rank* is 1 + the number
of models that are separated from it and better (Holm-adjusted pairwise p < alpha):
models the data cannot separate share a rank.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations
from typing import Callable

import numpy as np
import pandas as pd

from .. import gate as G
from ..metrics import gate as gm
from ..stats import DEFAULT_N_BOOT, DEFAULT_SEED, cell_id, multiplicities
from .models import Entry

PAIR_COLUMNS = ["metric", "cell", "model_a", "model_b", "value_a", "value_b", "delta",
                "ci_low", "ci_high", "n", "n_clusters", "better", "test", "p_value",
                "p_adjusted", "separated", "verdict", "note"]
RANK_COLUMNS = ["metric", "cell", "model", "value", "better", "rank", "rank_low", "rank_high",
                "n", "n_models"]
ALPHA = 0.05
NAN = float("nan")


def two_sided(p_one_sided: float) -> float:
    """Two-sided p-value from the gate's one-sided one (its null at margin 0)."""
    if p_one_sided is None or not np.isfinite(p_one_sided):
        return NAN
    return float(min(1.0, 2.0 * min(p_one_sided, 1.0 - p_one_sided)))


def adjust(p_values) -> np.ndarray:
    """THE multiplicity correction of the comparison family: Holm's (the gate's)."""
    from ..significance import holm
    return holm(p_values)


# ---------------------------------------------------------------- families of metrics

@dataclass(frozen=True)
class Family:
    """What one protocol compares: the per-item frame of a run, its key, the cells
    (``by``), the gate metrics, the cluster column and the shared item attributes."""
    protocol: str
    frame: Callable[[pd.DataFrame], pd.DataFrame]
    key: list[str]
    by: list[str]
    metrics: list
    cluster: str | None
    shared: list[str]


def families(cluster: dict[str, str] | None = None) -> list[Family]:
    clusters = {**G.DEFAULT_CLUSTERS, **(cluster or {})}
    bbq_cl = "question_index" if clusters["bbq"] == "template" else None
    gen_cl = "prompt" if clusters["generative"] == "prompt" else None
    per_family, overall = gm.generative_gate_metrics()
    cons_cols = [*G.BBQ_KEY, "context", "question_index", "mfaa", "gtc"]
    gen_cols = [*G.GENERATIVE_KEY, "stereotype", "demeaning", "refusal", "family", "slice",
                "prompt"]
    return [
        Family("bbq", G.bbq_frame, G.BBQ_KEY, ["dataset", "context"], gm.bbq_gate_metrics(),
               bbq_cl, ["group", "question_index"]),
        Family("bbq", G.position_frame, G.BBQ_KEY, ["dataset", "context"],
               [gm.position_gate_metric()], bbq_cl, ["question_index"]),
        Family("bbq", lambda r: _columns(G.consistency_frame(r), cons_cols), G.BBQ_KEY,
               ["dataset", "context"], gm.consistency_gate_metrics(), bbq_cl, ["question_index"]),
        Family("generative", lambda r: G.generative_frame(r)[gen_cols], G.GENERATIVE_KEY,
               ["family"], per_family, gen_cl, ["family", "slice", "prompt"]),
        Family("generative", lambda r: G.generative_frame(r)[gen_cols], G.GENERATIVE_KEY, [],
               overall, gen_cl, ["family", "slice", "prompt"]),
    ]


def _columns(df: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
    return df[[c for c in cols if c in df.columns]]


def _frames(entries: list[Entry], fam: Family) -> dict[str, pd.DataFrame]:
    """name -> the model's per-item frame (models without records of the protocol or
    with an empty frame are left out)."""
    out = {}
    for e in entries:
        run = e.run(fam.protocol)
        rec = None if run is None else run.records.get(fam.protocol)
        if rec is None or not len(rec):
            continue
        f = fam.frame(rec)
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
    for fam in families(cluster):
        frames = _frames(entries, fam)
        for a, b in combinations(sorted(frames, key=order.get), 2):
            t = gm.gate_table(frames[a], frames[b], fam.key, fam.by, fam.metrics, _zero_margin,
                              fam.cluster, fam.shared, n_boot=n_boot, seed=seed)
            if not len(t):
                continue
            parts.append(pd.DataFrame({
                "metric": t["metric"], "cell": t["cell"], "model_a": a, "model_b": b,
                "value_a": t["baseline"], "value_b": t["candidate"], "delta": t["delta"],
                "ci_low": t["ci_low"], "ci_high": t["ci_high"], "n": t["n"],
                "n_clusters": t["n_clusters"], "better": t["better"], "test": t["test"],
                "p_value": [two_sided(p) for p in t["p_value"]], "note": t["note"]}))
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
    if not r.separated:
        return "not separated"
    b_better = r.delta > 0 if r.better == "higher" else r.delta < 0
    return f"{r.model_b if b_better else r.model_a} better"


# ---------------------------------------------------------------- ranking

def ranking(entries: list[Entry], pairs: pd.DataFrame, *, n_boot: int = DEFAULT_N_BOOT,
            seed: int = DEFAULT_SEED, level: float = 0.95,
            cluster: dict[str, str] | None = None) -> pd.DataFrame:
    """One row per (metric, cell, model): :data:`RANK_COLUMNS`."""
    rows = []
    order = {e.name: i for i, e in enumerate(entries)}
    for fam in families(cluster):
        frames = _frames(entries, fam)
        names = sorted(frames, key=order.get)
        if len(names) < 2:
            continue
        common = _common_keys(frames, fam.key)
        aligned = {n: _restrict(frames[n], common, fam.key) for n in names}
        ref = aligned[names[0]]
        attrs = [c for c in dict.fromkeys([*fam.by, *fam.shared,
                                           *([fam.cluster] if fam.cluster else [])])
                 if c not in fam.key]
        groups = ref.groupby(fam.by, sort=True) if fam.by else [((), ref)]
        for keyv, g in groups:
            keyv = keyv if isinstance(keyv, tuple) else (keyv,)
            cell = cell_id(*keyv) or "all"
            idx = g.index.to_numpy()
            cl = g[fam.cluster].to_numpy() if fam.cluster else None
            W = multiplicities(len(idx), n_boot, seed, cl)
            for m in fam.metrics:
                if m.where is not None and not m.where(keyv):
                    continue
                point, boot = [], []
                for n in names:
                    sub = _pair_frame(aligned[names[0]].loc[idx], aligned[n].loc[idx], attrs)
                    _, Xn, stat = m.build(sub)
                    point.append(float(stat(Xn.sum(axis=0)[None, :])[0]))
                    boot.append(np.asarray(stat(W @ Xn), dtype=float))
                rows.extend(_rank_rows(m, cell, names, np.array(point), np.column_stack(boot),
                                       pairs, len(idx), level))
    return pd.DataFrame(rows, columns=RANK_COLUMNS)


def _common_keys(frames: dict[str, pd.DataFrame], key: list[str]) -> pd.DataFrame:
    common = None
    for f in frames.values():
        k = f[key].drop_duplicates()
        common = k if common is None else common.merge(k, on=key, how="inner")
    return common.sort_values(key, kind="stable").reset_index(drop=True)


def _restrict(f: pd.DataFrame, common: pd.DataFrame, key: list[str]) -> pd.DataFrame:
    """The frame's rows of the common keys, in the common keys' order, index 0..n-1."""
    return common.merge(f, on=key, how="left").reset_index(drop=True)


def _pair_frame(base: pd.DataFrame, other: pd.DataFrame, attrs: list[str]) -> pd.DataFrame:
    """The aligned frame the gate metrics read (columns ``_b`` / ``_c``, the item
    attributes unsuffixed): here ``_c`` is the model being ranked."""
    value_cols = [c for c in other.columns if c not in attrs]
    out = other[value_cols].add_suffix("_c")
    out = pd.concat([base[value_cols].add_suffix("_b"), out,
                     base[[c for c in attrs if c in base.columns]]], axis=1)
    out["one_b"] = 1.0
    out["one_c"] = 1.0
    return out


def _rank_rows(m, cell: str, names: list[str], point: np.ndarray, boot: np.ndarray,
               pairs: pd.DataFrame, n: int, level: float) -> list[dict]:
    sign = -1.0 if m.higher_is_better else 1.0     # rank ascending in "badness"
    boot_ranks = _ranks(sign * boot)
    alpha = (1.0 - level) / 2.0
    sep = pairs[(pairs["metric"] == m.name) & (pairs["cell"] == cell)]
    out = []
    for j, name in enumerate(names):
        r = boot_ranks[:, j]
        r = r[~np.isnan(r)]
        lo = hi = NAN
        if len(r) and np.isfinite(point[j]):
            lo, hi = (float(np.quantile(r, q, method="inverted_cdf")) for q in (alpha, 1 - alpha))
        better_than_me = 0
        for other in names:
            if other != name and _separated_better(sep, other, name, m.higher_is_better):
                better_than_me += 1
        rank = float(1 + better_than_me) if np.isfinite(point[j]) else NAN
        out.append({"metric": m.name, "cell": cell, "model": name, "value": point[j],
                    "better": "higher" if m.higher_is_better else "lower", "rank": rank,
                    "rank_low": lo, "rank_high": hi, "n": n, "n_models": len(names)})
    return out


def _ranks(badness: np.ndarray) -> np.ndarray:
    """Per row, 1 + the number of models strictly better (ties share the lower rank);
    NaN where a model's value is undefined (those models are not ranked)."""
    v = np.where(np.isnan(badness), np.nan, badness)
    better = (v[:, None, :] < v[:, :, None])           # [row, j, k]: k better than j
    ranks = 1.0 + better.sum(axis=2)
    return np.where(np.isnan(v), np.nan, ranks)


def _separated_better(sep: pd.DataFrame, other: str, name: str, higher: bool) -> bool:
    r = sep[((sep["model_a"] == other) & (sep["model_b"] == name)) |
            ((sep["model_a"] == name) & (sep["model_b"] == other))]
    if not len(r):
        return False
    r = r.iloc[0]
    if not bool(r["separated"]) or not math.isfinite(float(r["delta"])):
        return False
    b_better = r["delta"] > 0 if higher else r["delta"] < 0
    winner = r["model_b"] if b_better else r["model_a"]
    return winner == other
