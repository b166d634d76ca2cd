"""Consistency from a known letter distribution (exact, no simulation), and a test
of whether sampled repeats follow it.

For an item whose answer distribution over the options is known, ``p = (p0, p1, p2)``
in the ORIGINAL option order (a local model's letter probabilities, or an API's
logprobs), with ``p3 = 1 - p0 - p1 - p2`` the mass of invalid answers, n i.i.d.
repeats give counts ``N ~ Multinomial(n, p)``. Consistency is over VALID answers
(:mod:`fairness_tests.benchmarks.bbq.consistency`: an invalid answer is no answer, an item
with fewer than two valid answers does not count), so the expectations are taken
given the item's number of valid answers v: the valid counts are then
``M ~ Multinomial(v, q)`` with ``q_j = p_j / (p0 + p1 + p2)`` (j = 0, 1, 2), and

- expected MFAA% = 100 * E[max_j M_j] / v, computed exactly by enumerating the
  C(v + 2, 2) count vectors with their multinomial probabilities
  ``v! / prod M_j! * prod q_j^M_j`` (v = 20: 231 vectors);
- expected GTC% = 100 * E[M_label] / v = 100 * q_label;
- P(flagged) = P(at least one of the v answers is the stereotyped wrong answer)
  = 1 - (1 - q_t)^v when the target option t is neither the label nor "unknown",
  else 0.

All three are NaN when v < 2 or the options have no mass (p0 + p1 + p2 = 0). Without
invalid mass (q = p) and without invalid answers (v = n) they are the unconditional
expectations over the n repeats.

Goodness of fit (do the repeats follow the distribution? a serving-side cache or
nondeterminism shows up here): per cell, Pearson's ``X^2 = sum_items sum_j
(O_ij - n_i p_ij)^2 / (n_i p_ij)`` over options with ``p_ij > 0`` (an answer with
p_ij = 0 makes X^2 infinite), ``df = sum_i (k_i - 1)`` with k_i the options of
positive probability; p-value by the parametric bootstrap: repeats drawn from the
stated distributions (seeded, B = 2,000), ``p = (1 + #{X^2_b >= X^2}) / (1 + B)``
(exact in the limit, valid with small expected counts where the chi-square
approximation is not).
"""
from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fairness_tests.metrics.schema import N_OPTIONS
from fairness_tests.stats.bootstrap import DEFAULT_SEED

K = N_OPTIONS + 1            # the three options + invalid
DEFAULT_N_SIM = 2000


def has_distribution(letter_probs) -> bool:
    """Whether one prediction's ``letter_probs`` is given (not None / NaN)."""
    return letter_probs is not None and not (isinstance(letter_probs, float)
                                             and math.isnan(letter_probs))


def distribution(letter_probs) -> np.ndarray:
    """(I, 4) distributions over (option 0, 1, 2, invalid) from (I, 3) letter
    probabilities; the invalid mass is 1 - sum (clipped at 0; a sum a little above 1
    from rounding is renormalised). Raises ValueError for values outside [0, 1] or a
    sum above 1 + 1e-6."""
    P = np.atleast_2d(np.asarray(letter_probs, dtype=np.float64))
    if P.shape[1] != N_OPTIONS:
        raise ValueError(f"letter_probs needs {N_OPTIONS} values per item, got {P.shape[1]}")
    if np.isnan(P).any() or (P < 0).any() or (P > 1).any():
        raise ValueError("letter_probs must be probabilities in [0, 1]")
    total = P.sum(axis=1, keepdims=True)
    if (total > 1 + 1e-6).any():
        raise ValueError("letter_probs sum to more than 1")
    P = np.where(total > 1, P / np.where(total > 1, total, 1.0), P)
    return np.column_stack([P, np.clip(1.0 - P.sum(axis=1), 0.0, 1.0)])


@functools.lru_cache(maxsize=32)
def compositions(n: int, k: int = K) -> tuple[np.ndarray, np.ndarray]:
    """(M, k) every count vector of k non-negative integers summing to n, and the
    log multinomial coefficients ln(n! / prod N_j!) (stars and bars)."""
    rows = []
    for bars in itertools.combinations(range(n + k - 1), k - 1):
        edges = (-1, *bars, n + k - 1)
        rows.append([edges[i + 1] - edges[i] - 1 for i in range(k)])
    C = np.array(rows, dtype=np.int64).reshape(-1, k)
    logc = math.lgamma(n + 1) - np.vectorize(math.lgamma)(C + 1.0).sum(axis=1)
    C.flags.writeable = False
    return C, np.asarray(logc, dtype=np.float64)


def expected_max_count(P: np.ndarray, n: int) -> np.ndarray:
    """E[max_j N_j] for N ~ Multinomial(n, P[i]) for every row of P (I, k), exactly."""
    P = np.atleast_2d(np.asarray(P, dtype=np.float64))
    C, logc = compositions(int(n), P.shape[1])
    # sum_j N_j ln p_j with 0 * ln 0 = 0: ln 0 stands in as -1e300, so that a count
    # of 0 times it is 0 and a positive count gives exp(-huge) = 0
    with np.errstate(divide="ignore"):
        logP = np.where(P > 0, np.log(np.where(P > 0, P, 1.0)), -1e300)
    prob = np.exp(logc[:, None] + C.astype(np.float64) @ logP.T)      # (M, I)
    return C.max(axis=1).astype(np.float64) @ prob


def valid_distribution(letter_probs) -> np.ndarray:
    """(I, 3) the distributions over the options given a valid answer,
    ``q_j = p_j / (p0 + p1 + p2)``; a row without option mass is NaN."""
    P = distribution(letter_probs)[:, :N_OPTIONS]
    total = P.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(total > 0, P / np.where(total > 0, total, 1.0), np.nan)


def expected_per_item(letter_probs, label, unknown_loc, target_loc, n: int) -> pd.DataFrame:
    """Per item: ``mfaa_expected`` (%), ``gtc_expected`` (%), ``p_flagged`` given ``n``
    VALID answers (module docstring; arrays aligned on items; label/unknown_loc/
    target_loc in the original option order, target NaN = no stereotyped option);
    NaN for n < 2 or an item without option mass."""
    Q = valid_distribution(letter_probs)
    y = np.asarray(label, dtype=np.int64)
    u = np.asarray(unknown_loc, dtype=np.float64)
    t = np.asarray(target_loc, dtype=np.float64)
    rows = np.arange(len(Q))
    ok = ~np.isnan(Q).any(axis=1) & (int(n) >= 2)
    Qz = np.where(ok[:, None], np.nan_to_num(Q), 0.0)
    t_ok = ~np.isnan(t) & (t != y) & (t != u)
    q_t = np.where(t_ok, Qz[rows, np.nan_to_num(t).astype(np.int64)], 0.0)
    mfaa = 100.0 * expected_max_count(Qz, int(n)) / max(int(n), 1) if int(n) >= 2 \
        else np.full(len(Q), np.nan)
    return pd.DataFrame({
        "mfaa_expected": np.where(ok, mfaa, np.nan),
        "gtc_expected": np.where(ok, 100.0 * Qz[rows, y], np.nan),
        "p_flagged": np.where(ok, np.where(t_ok, 1.0 - (1.0 - q_t) ** int(n), 0.0), np.nan),
    })


@dataclass(frozen=True)
class FitResult:
    statistic: float          # Pearson X^2 summed over the items
    df: int
    p_value: float
    n_simulations: int
    method: str = "Pearson X^2, parametric-bootstrap p-value"


def _pearson_items(O: np.ndarray, E: np.ndarray) -> np.ndarray:  # noqa: E741  the formula's O, E
    """Each item's X^2 contribution, summed over the last axis (options); options with
    E = 0 contribute 0 when O = 0 and inf otherwise."""
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(E > 0, (O - E) ** 2 / np.where(E > 0, E, 1.0),
                     np.where(O > 0, np.inf, 0.0))
    return t.sum(axis=-1)


def goodness_of_fit(counts: np.ndarray, P: np.ndarray, n_sim: int = DEFAULT_N_SIM,
                    seed: int = DEFAULT_SEED) -> FitResult:
    """Do the observed answer counts (I, 4) follow the distributions P (I, 4)?
    (see the module docstring)."""
    return goodness_of_fit_cells(counts, P, np.ones((1, len(counts)), dtype=bool),
                                 n_sim=n_sim, seed=seed)[0]


def goodness_of_fit_cells(counts: np.ndarray, P: np.ndarray, cells: np.ndarray,
                          n_sim: int = DEFAULT_N_SIM,
                          seed: int = DEFAULT_SEED) -> list[FitResult]:
    """:func:`goodness_of_fit` of several cells pooling the same items: ``cells`` (C, I)
    says which items each cell pools. The parametric bootstrap draws every item's
    repeats once (B x I multinomial vectors) and each cell sums its items' X^2
    contributions, so a table of C cells costs one draw instead of C; each cell's
    p-value is a parametric-bootstrap p-value with the same Monte Carlo error
    (sqrt(p (1 - p) / B) at most 0.011 for B = 2,000). A cell pooling no item gets
    X^2 = 0 on df 0 and p = 1."""
    O = np.asarray(counts, dtype=np.float64)  # noqa: E741  observed, as in the formula
    P = np.asarray(P, dtype=np.float64)
    cells = np.atleast_2d(np.asarray(cells, dtype=bool))
    n_i = O.sum(axis=1)
    E = n_i[:, None] * P
    observed_items = _pearson_items(O, E)
    df_items = ((P > 0).sum(axis=1) - 1).clip(min=0)
    rng = np.random.default_rng(seed)
    sims = rng.multinomial(n_i.astype(np.int64), P, size=(n_sim, len(P)))
    sim_items = _pearson_items(sims.astype(np.float64), E[None, :, :])      # (B, I)
    out = []
    for m in cells:
        observed = float(observed_items[m].sum())
        stats = sim_items[:, m].sum(axis=1)
        p = (1.0 + float(np.sum(stats >= observed - 1e-9 * max(1.0, observed)))) / (1.0 + n_sim)
        out.append(FitResult(observed, int(df_items[m].sum()), p, int(n_sim)))
    return out


def expected_items(items: pd.DataFrame, rep: pd.DataFrame) -> pd.DataFrame:
    """Per repeated item whose answers carry a ``letter_probs`` distribution (a list
    [p0, p1, p2] per prediction row, original option order, None when unknown):
    ``dataset, example_id, n_repeats, mfaa_expected, gtc_expected, p_flagged`` given
    its number of valid answers (:func:`expected_per_item`), the observed answer counts
    ``obs_0..obs_3`` (3 = invalid)
    and the distribution ``p_0..p_3`` (the mean of the rows' distributions; equal rows
    in practice). Empty when no row has a distribution."""
    cols = ["dataset", "example_id", "n_repeats", "mfaa_expected", "gtc_expected",
            "p_flagged", *(f"obs_{k}" for k in range(K)), *(f"p_{k}" for k in range(K))]
    if "letter_probs" not in rep:
        return pd.DataFrame(columns=cols)
    has = rep["letter_probs"].map(has_distribution)
    known = rep[has]
    if known.empty:
        return pd.DataFrame(columns=cols)
    key = ["dataset", "example_id"]
    probs = pd.DataFrame(np.array(known["letter_probs"].tolist(), dtype=np.float64),
                         columns=["l0", "l1", "l2"], index=known.index)
    mean = pd.concat([known[key], probs], axis=1).groupby(key, sort=True).mean()
    r = rep.merge(mean.reset_index()[key], on=key)
    a = r["answer"].to_numpy(dtype=np.float64)
    slot = np.where(np.isnan(a), 3, np.nan_to_num(a)).astype(np.int64)
    obs = (pd.get_dummies(pd.Categorical(slot, categories=range(K))).astype(float)
           .set_axis([f"obs_{k}" for k in range(K)], axis=1))
    obs = pd.concat([r[key].reset_index(drop=True), obs], axis=1).groupby(key, sort=True).sum()
    t = mean.join(obs).reset_index().merge(
        items[[*key, "label", "unknown_loc", "target_loc"]], on=key)
    n_i = t[[f"obs_{k}" for k in range(K)]].sum(axis=1).astype(int).to_numpy()
    v_i = t[[f"obs_{k}" for k in range(N_OPTIONS)]].sum(axis=1).astype(int).to_numpy()
    P = distribution(t[["l0", "l1", "l2"]].to_numpy())
    parts = []
    for v in np.unique(v_i):          # one enumeration per number of valid answers
        m = v_i == v
        e = expected_per_item(t.loc[m, ["l0", "l1", "l2"]].to_numpy(), t.loc[m, "label"],
                              t.loc[m, "unknown_loc"], t.loc[m, "target_loc"], int(v))
        e.index = t.index[m]
        parts.append(e)
    out = t[key].join(pd.concat(parts)).assign(n_repeats=n_i)
    for k in range(K):
        out[f"obs_{k}"] = t[f"obs_{k}"].to_numpy()
        out[f"p_{k}"] = P[:, k]
    return out[cols]
