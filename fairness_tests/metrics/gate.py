"""Model-upgrade gate, the pure part: paired differences candidate - baseline on the
SAME items (or generations), one-sided tests against a margin, Holm across the
family of comparisons, and the smallest worsening each cell can detect.

Per metric f (a function of column sums of a per-item matrix, as every metric of
:mod:`fairness_tests.metrics.sum_stats` is), with X_b and X_c the baseline's and the
candidate's per-item matrices aligned on the item key::

    delta = f(1' X_c) - f(1' X_b)

and its 95% CI is the percentile interval of ``f(W X_c) - f(W X_b)`` over resamples
``W`` of :func:`fairness_tests.stats.bootstrap.multiplicities`: ONE multiplicity matrix for both
runs (a paired bootstrap), over the clusters the items share (BBQ templates, generative
prompts: the same clusters are drawn in both runs) or over items. Pairing removes the
item-difficulty variance that two independent CIs would double count.

``worsening`` = -delta for a higher-is-better metric (accuracy, MFAA, GTC), +delta
otherwise. Each cell tests, in its mode (:mod:`fairness_tests.stats.significance`):

- ``harm``: H0 worsening <= margin; the cell FAILS when the Holm-adjusted p < alpha;
- ``non_inferiority``: H0 worsening >= margin; the cell passes (``no_worse``) only
  when the adjusted p < alpha, else it FAILS ("not shown to be no worse").

p-values: accuracy by the score test for paired proportions on the discordant items
(McNemar at margin 0) when items are resampled; when clusters are, on the per-cluster
discordance balances by the CR2 cluster-robust Wald test with Bell-McCaffrey degrees of
freedom (harm) or the cluster score test (non-inferiority; the clustered McNemar test
at margin 0), :func:`fairness_tests.stats.significance.cluster_paired_rate_test`; every other
metric by ``z = (worsening - margin) / se`` with ``se`` the paired
bootstrap's standard deviation. With C clusters resampled, the variance is taken times
C / (C - 1) and z referred to Student t with C - 1 degrees of freedom. Holm's procedure
runs over every cell of the gate (one family); ``detectable`` is the worsening the cell
fails with 80% probability at the per-cell level alpha / (number of cells) (NaN for a
non-accuracy cell in which the two runs agree on every item: there is no observed
variation to compute power from).

A cell is *not evaluated* when the delta or its test is undefined, and when it has
fewer than :data:`MIN_UNITS` resampled units (clusters, or items when items are
resampled): one cluster resampled gives a zero-width interval and would give p = 0 for
any difference, so such a cell gets no interval, no p-value and a note saying why
("not evaluable: ..."). Such a cell is outside the Holm family (no p-value) and its
verdict depends on the mode:

- ``harm``: ``not_evaluable`` (no evidence of harm can be had; it does not fail);
- ``non_inferiority``: ``fail``, the note starting with :data:`NOT_SHOWN` and then
  the reason: non-inferiority must be shown, and a comparison that cannot be
  evaluated never shows it.

Descriptive verdicts in ``harm`` mode when the cell does not fail: ``worse`` (the CI
excludes 0 on the worse side), ``better``, ``no_difference``. The note says
:data:`AGREE` only when the two runs' per-item values of the metric are identical.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from fairness_tests.stats.bootstrap import (
    DEFAULT_LEVEL,
    DEFAULT_N_BOOT,
    DEFAULT_SEED,
    Estimate,
    bootstrap,
    cell_id,
    multiplicities,
)
from fairness_tests.stats.significance import (
    ALPHA,
    MODES,
    POWER,
    GateMode,
    cluster_detectable_drop,
    cluster_paired_rate_test,
    cluster_spread,
    detectable_accuracy_drop,
    detectable_worsening,
    effective_clusters,
    holm,
    normal_test,
    paired_rate_test,
)

MIN_UNITS = 2            # resampled units (clusters, or items) a paired test needs
AGREE = "the runs agree on every item of this cell (for this metric)"
NOT_EVALUABLE = "not evaluable: "          # how the note of a cell without a test starts
UNDEFINED = NOT_EVALUABLE + "the metric or its test is undefined in this cell"
NOT_SHOWN = "not shown to be no worse (non-inferiority needs a test): "
GATE_COLUMNS = ["rule", "metric", "cell", "baseline", "candidate", "delta", "ci_low",
                "ci_high", "se", "n", "n_clusters", "effective_clusters", "deff", "better",
                "mode", "margin", "test", "discordance", "p_value", "p_adjusted", "detectable",
                "verdict", "note"]
NAN = float("nan")


@dataclass(frozen=True)
class GateMetric:
    """A gated metric. ``build(cell_frame)`` -> (X_b, X_c, statistic) for one cell of
    the aligned per-item frame (columns suffixed ``_b`` / ``_c``); ``rule``: the id of
    the default rule whose ``gate: {mode, margin}`` applies (``{last cell key value:
    rule id}`` where the rule depends on the cell); ``margin``: the tolerated worsening
    when the rule states none; ``where``: which cells (by their key) the metric applies
    to; ``paired_rate``: a rate of 0/1 items (its first column the item's flag), tested
    by the score test on the discordant items.

    How the gate's report words what a cell detects ("this gate detects an accuracy
    drop of at least 3.1 points"): ``worsening`` names a worsening of the metric (empty:
    "a worsening of <name>"), shown times ``scale`` followed by ``unit``."""
    name: str
    build: Callable[[pd.DataFrame], tuple[np.ndarray, np.ndarray, Callable]]
    higher_is_better: bool
    margin: float
    rule: str | dict[str, str] | None = None
    where: Callable[[tuple], bool] | None = None
    paired_rate: bool = False            # accuracy: the score test on discordant items
    worsening: str = ""
    scale: float = 1.0
    unit: str = ""

    def rule_for(self, key: tuple) -> str | None:
        if isinstance(self.rule, dict):
            return self.rule.get(str(key[-1]) if key else "")
        return self.rule

    def wording(self) -> tuple[str, float, str]:
        """(what a worsening is called, the display scale, the unit)."""
        return self.worsening or generic_wording(self.name)[0], self.scale, self.unit


def generic_wording(name: str) -> tuple[str, float, str]:
    """The wording of a metric that declares none: "a worsening of <name>", scale 1, no
    unit."""
    return f"a worsening of {name}", 1.0, ""


# ---------------------------------------------------------------- builders

def paired_columns(*names: str) -> Callable[[pd.DataFrame], tuple[np.ndarray, np.ndarray]]:
    """(X_b, X_c): the columns ``names`` of the aligned frame, each run's (``_b``/``_c``)."""
    def build(g):
        return (g[[f"{c}_b" for c in names]].to_numpy(float),
                g[[f"{c}_c" for c in names]].to_numpy(float))
    return build


def simple_build(names: Sequence[str], stat: Callable) -> Callable:
    """A metric's ``build``: the columns ``names`` and the statistic ``stat`` of their sums."""
    b = paired_columns(*names)
    return lambda g: (*b(g), stat)


def absolute(f: Callable) -> Callable:
    """The statistic ``|f|``."""
    return lambda s: np.abs(f(s))


def group_build(stat_of: Callable[[int], Callable], group: str = "group",
                flag: str = "fav") -> Callable:
    """A metric over the G groups of the item attribute ``group`` (the same in both
    runs): the sums laid out [n@g1 .. n@gG, flag@g1 .. flag@gG]; ``stat_of(G)`` is the
    statistic of those sums."""
    def build(g):
        has = g[group].notna().to_numpy()
        codes, names = pd.factorize(g[group].where(has), sort=True)
        G = len(names)
        onehot = np.zeros((len(g), G))
        onehot[np.flatnonzero(has), codes[has]] = 1.0
        Xb = np.hstack([onehot, g[f"{flag}_b"].to_numpy(float)[:, None] * onehot])
        Xc = np.hstack([onehot, g[f"{flag}_c"].to_numpy(float)[:, None] * onehot])
        return Xb, Xc, stat_of(G)
    return build


def last_key_is(value: str) -> Callable[[tuple], bool]:
    """A metric's ``where``: the cells whose last key value is ``value``."""
    return lambda key: bool(key) and key[-1] == value


# ---------------------------------------------------------------- cells

def paired_delta(Xb: np.ndarray, Xc: np.ndarray, statistic, n_boot: int = DEFAULT_N_BOOT,
                 seed: int = DEFAULT_SEED, level: float = DEFAULT_LEVEL,
                 clusters: np.ndarray | None = None) -> tuple[Estimate, Estimate, Estimate]:
    """(baseline, candidate, delta = candidate - baseline) from one multiplicity matrix
    (the same item or cluster resamples in both runs)."""
    n, k = Xb.shape
    W = multiplicities(n, n_boot, seed, clusters)
    b = bootstrap(Xb, statistic, n_boot, seed, level, W=W)
    c = bootstrap(Xc, statistic, n_boot, seed, level, W=W)
    d = bootstrap(np.hstack([Xb, Xc]), lambda s: statistic(s[:, k:]) - statistic(s[:, :k]),
                  n_boot, seed, level, W=W, clusters=clusters)
    return b, c, d


def align(base: pd.DataFrame, cand: pd.DataFrame, key: Sequence[str]
          ) -> tuple[pd.DataFrame, int, int]:
    """Inner join on the item key (suffixes _b, _c); also the counts of items only in
    the baseline / only in the candidate (reported, not used)."""
    key = list(key)
    for name, t in (("baseline", base), ("candidate", cand)):
        if t.duplicated(key).any():
            raise ValueError(f"{name} has duplicate items on key {key}")
    j = base.merge(cand, on=key, how="outer", suffixes=("_b", "_c"), indicator=True)
    only_b = int((j["_merge"] == "left_only").sum())
    only_c = int((j["_merge"] == "right_only").sum())
    return j[j["_merge"] == "both"].drop(columns="_merge").reset_index(drop=True), only_b, only_c


@dataclass(frozen=True)
class GateSetting:
    """The decision setting of one cell: mode and margin."""
    mode: GateMode
    margin: float


SCORE_TEST = "score test, paired proportions (McNemar at margin 0)"
CLUSTER_TESTS = {"harm": "cluster-robust Wald, paired proportions (CR2, Bell-McCaffrey df)",
                 "non_inferiority": "cluster score test, paired proportions (clustered "
                                    "McNemar at margin 0)"}


@dataclass(frozen=True)
class AccuracyTest:
    """The test of one paired accuracy cell; ``items``/``spread`` per cluster (the
    power model of :func:`fairness_tests.stats.significance.cluster_detectable_drop`), None
    when items were resampled."""
    p_value: float
    test: str
    discordance: float
    effective_clusters: float = NAN
    items: tuple | None = None
    spread: tuple | None = None


def accuracy_test(right_b: np.ndarray, right_c: np.ndarray, clusters: np.ndarray | None,
                  margin: float, mode: GateMode) -> AccuracyTest:
    """One paired accuracy cell: ``right_b``/``right_c`` per item; ``clusters`` the
    cluster of each item (None: items resampled, the score test; else the mode's test
    on the per-cluster balances b_t - c_t, :func:`fairness_tests.stats.significance.
    cluster_paired_rate_test`)."""
    only_b, only_c = right_b & ~right_c, ~right_b & right_c
    n = len(right_b)
    discordance = float(only_b.sum() + only_c.sum()) / n if n else NAN
    if clusters is None:
        p = paired_rate_test(int(only_b.sum()), int(only_c.sum()), n, margin, mode)
        return AccuracyTest(p, SCORE_TEST, discordance)
    _, codes = np.unique(clusters, return_inverse=True)
    balance = np.bincount(codes, only_b.astype(float) - only_c)
    items = np.bincount(codes).astype(float)
    return AccuracyTest(cluster_paired_rate_test(balance, items, margin, mode),
                        CLUSTER_TESTS[mode], discordance, effective_clusters(items),
                        tuple(items), tuple(cluster_spread(balance, items)))


def gate_table(base: pd.DataFrame, cand: pd.DataFrame, key: Sequence[str], by: Sequence[str],
               metrics: Sequence[GateMetric], setting: Callable[[GateMetric, tuple], GateSetting],
               cluster: str | None = None, shared: Sequence[str] = (),
               n_boot: int = DEFAULT_N_BOOT, seed: int = DEFAULT_SEED,
               level: float = DEFAULT_LEVEL) -> pd.DataFrame:
    """One row per (metric, cell of ``by``) with the raw test (``se``: the paired
    bootstrap's standard deviation of the delta; ``p_adjusted``,
    ``detectable`` and the verdict are filled by :func:`decide` over the whole family,
    which also drops the ``power_model`` column: a clustered accuracy cell's items and
    spread per cluster, for its power).

    ``base``/``cand``: per-item tables with ``key``, the ``by`` columns, the columns
    the metrics read, and ``shared`` item attributes (the same in both runs: cluster,
    group, slice); ``cluster``: the column whose values are resampled as clusters
    (None: items); ``setting(metric, cell key)`` -> mode and margin."""
    shared = [c for c in dict.fromkeys([*by, *shared, *([cluster] if cluster else [])])
              if c not in key]
    attrs = base[[*key, *shared]]
    j, only_b, only_c = align(base.drop(columns=shared).assign(one=1.0),
                              cand.drop(columns=shared, errors="ignore").assign(one=1.0), key)
    j = j.merge(attrs, on=list(key), how="left")
    note = (f"{only_b} items only in the baseline, {only_c} only in the candidate (not "
            "compared)") if only_b or only_c else ""
    rows = []
    groups = j.groupby(list(by), sort=True) if by else [((), j)]
    for keyv, g in groups:
        keyv = keyv if isinstance(keyv, tuple) else (keyv,)
        cell = cell_id(*keyv) or "all"
        cl = g[cluster].to_numpy() if cluster else None
        units = len(pd.unique(cl)) if cl is not None else len(g)
        for m in metrics:
            if m.where is not None and not m.where(keyv):
                continue
            s = setting(m, keyv)
            Xb, Xc, stat = m.build(g)
            cell_note = "; ".join(x for x in (note, AGREE if np.array_equal(Xb, Xc, equal_nan=True)
                                              else "") if x)
            if units < MIN_UNITS:
                rows.append(_too_few(m, keyv, cell, s, Xb, Xc, stat, units, cluster, cell_note))
                continue
            b, c, d = paired_delta(Xb, Xc, stat, n_boot, seed, level, cl)
            worsening = -d.value if m.higher_is_better else d.value
            acc = None
            if m.paired_rate:
                acc = accuracy_test(Xb[:, 0] > 0, Xc[:, 0] > 0, cl, s.margin, s.mode)
                p, test = acc.p_value, acc.test
            else:
                p = normal_test(worsening, d.se, s.margin, s.mode, d.n_clusters)
                test = "paired bootstrap z"
            if np.isnan(d.value):
                p = NAN
            rows.append(dict(rule=m.rule_for(keyv) or "", metric=m.name, cell=cell,
                             baseline=b.value, candidate=c.value, delta=d.value,
                             ci_low=d.ci_low, ci_high=d.ci_high, se=d.se, n=len(g),
                             n_clusters=d.n_clusters,
                             effective_clusters=acc.effective_clusters if acc else NAN,
                             deff=d.deff,
                             better="higher" if m.higher_is_better else "lower",
                             mode=s.mode, margin=s.margin, test=test,
                             discordance=acc.discordance if acc else NAN,
                             p_value=p, p_adjusted=NAN, detectable=NAN, verdict="",
                             note=cell_note,
                             power_model=(acc.items, acc.spread) if acc and acc.items else None))
    return pd.DataFrame(rows, columns=[*GATE_COLUMNS, "power_model"])


def _too_few(m: GateMetric, keyv: tuple, cell: str, s: GateSetting, Xb: np.ndarray,
             Xc: np.ndarray, stat, units: int, cluster: str | None, note: str) -> dict:
    """The row of a cell with fewer than :data:`MIN_UNITS` resampled units: the point
    values and their difference, no interval and no test (a variance needs two units;
    one cluster resampled gives a zero-width interval and p = 0 for any difference)."""
    vb = float(stat(Xb.sum(axis=0)[None, :])[0])
    vc = float(stat(Xc.sum(axis=0)[None, :])[0])
    what = f"cluster ({cluster})" if cluster else "item"
    why = (f"{NOT_EVALUABLE}{units} {what} in this cell; a paired test and its interval "
           f"need at least {MIN_UNITS} to estimate the variance of the difference")
    return dict(rule=m.rule_for(keyv) or "", metric=m.name, cell=cell, baseline=vb,
                candidate=vc, delta=vc - vb, ci_low=NAN, ci_high=NAN, se=NAN, n=len(Xb),
                n_clusters=float(units) if cluster else NAN, effective_clusters=NAN,
                deff=NAN, better="higher" if m.higher_is_better else "lower", mode=s.mode,
                margin=s.margin, test=SCORE_TEST if m.paired_rate and not cluster else
                CLUSTER_TESTS[s.mode] if m.paired_rate else "paired bootstrap z",
                discordance=NAN, p_value=NAN, p_adjusted=NAN, detectable=NAN, verdict="",
                note="; ".join(x for x in (why, note) if x), power_model=None)


def decide(table: pd.DataFrame, alpha: float = ALPHA, power: float = POWER) -> pd.DataFrame:
    """Holm-adjusted p-values over every row (one family), verdicts on the adjusted
    p-values, and the minimal detectable worsening at alpha / (family size)."""
    t = table.copy()
    t["p_adjusted"] = holm(t["p_value"].to_numpy(float))
    m = int(t["p_value"].notna().sum())
    a = alpha / max(m, 1)
    verdicts, detect = [], []
    rows: Iterable[Any] = t.itertuples(index=False)  # gate-table rows (mixed column types)
    for r in rows:
        verdicts.append(_verdict(r, alpha))
        if r.mode not in MODES:
            raise ValueError(f"gate mode {r.mode!r}")
        if not np.isfinite(r.p_value):       # not evaluable: no test, no power
            detect.append(NAN)
        elif r.test in CLUSTER_TESTS.values():
            items, spread = r.power_model
            detect.append(cluster_detectable_drop(items, spread, r.discordance, r.margin, a,
                                                  r.mode, power))
        elif r.test == SCORE_TEST:
            detect.append(detectable_accuracy_drop(int(r.n), r.discordance, r.margin, a, r.mode,
                                                   power))
        elif r.se > 0:
            detect.append(detectable_worsening(r.se, r.margin, a, r.mode, power, r.n_clusters))
        else:        # the difference does not vary over the resamples (e.g. the runs
            detect.append(NAN)     # agree on every item): no observed variation to use
    t["verdict"] = verdicts
    t["detectable"] = detect
    t["note"] = [_note(r.note, v, evaluated(r))
                 for r, v in zip(t.itertuples(index=False), verdicts, strict=True)]
    return t[GATE_COLUMNS]


def evaluated(r: Any) -> bool:
    """Whether a gate row (a decided row, or a row of the table) was compared: its
    delta and its test's p-value are defined."""
    return not any(math.isnan(float(x)) for x in (r.delta, r.p_value))


def _note(note: Any, verdict: str, was_evaluated: bool) -> str:
    """A row's note, saying why a row without a test was not evaluated (its own
    "not evaluable: ..." reason, else :data:`UNDEFINED`), and prefixed with
    :data:`NOT_SHOWN` where that fails a non-inferiority cell."""
    note = "" if not isinstance(note, str) else note
    if was_evaluated:
        return note
    if not note.startswith(NOT_EVALUABLE):
        note = "; ".join(x for x in (UNDEFINED, note) if x)
    return NOT_SHOWN + note if verdict == "fail" else note


def _verdict(r, alpha: float) -> str:
    if not evaluated(r):          # no test: harm has no evidence, non-inferiority no showing
        return "fail" if r.mode == "non_inferiority" else "not_evaluable"
    if r.mode == "non_inferiority":
        return "no_worse" if r.p_adjusted < alpha else "fail"
    if r.p_adjusted < alpha:
        return "fail"
    lo, hi = (r.ci_low, r.ci_high) if r.better == "higher" else (-r.ci_high, -r.ci_low)
    if hi < 0:
        return "worse"
    if lo > 0:
        return "better"
    return "no_difference"
