"""Permutation test of "no difference between groups", for max-type metrics.

Slice disparity (max - min), refusal gap, worst-slice rate, SF, DF and position
bias are maxima over groups: their percentile bootstrap is biased upward and its
interval cannot cover 0, so it is no test of a difference. This module gives one.

Null hypothesis: the group label carries no information about the outcome, given
the stratum. Under it the labels are exchangeable within each stratum, so the
statistic's null distribution is obtained by permuting the labels within strata:

- BBQ SF / DF: labels = the intersectional group, strata = templates
  (``question_index``): template effects stay where they are.
- position bias: labels = the rotation, strata = items (an item's answers under
  its three rotations are exchangeable when the model answers by content).
- generative disparity / refusal gap: labels = the slice, units = prompts (all
  rows of a prompt move together), strata = the prompt frame (family x paraphrase
  x occupation): a prompt's repeats over seeds and decoding stay together.

Every statistic here is a function of per-group column sums ``S[g] = sum_{i: label_i
= g} X_i`` (an (m, G, k) array for m label vectors), so all permutations are
evaluated at once with one ``bincount`` per column: no Python loop over permutations.

p-value (one-sided, large statistic = evidence of a difference), with the +1
correction that makes it valid for a finite number B of random permutations
(Phipson & Smyth 2010)::

    p = (1 + #{b : T_b >= T_obs}) / (1 + B)
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np

from fairness_tests.stats.bootstrap import DEFAULT_SEED, cluster_codes

DEFAULT_N_PERM = 2000
_CHUNK = 500                     # permutations per bincount pass (bounds memory)


@dataclass(frozen=True)
class PermutationResult:
    """``statistic``: what was permuted and how (shown on the card);
    ``value``: the observed statistic; ``p_value``: with the +1 correction."""
    statistic: str
    value: float
    p_value: float
    n_permutations: int


def group_sums(X: np.ndarray, labels: np.ndarray, n_groups: int) -> np.ndarray:
    """(m, G, k) per-group column sums of X (n, k) for each of m label vectors
    ``labels`` (m, n) with values 0..G-1."""
    X = np.asarray(X, dtype=np.float64)
    labels = np.atleast_2d(labels)
    m, n = labels.shape
    flat = (labels + (np.arange(m)[:, None] * n_groups)).ravel()
    out = np.empty((m, n_groups, X.shape[1]))
    for j in range(X.shape[1]):
        out[:, :, j] = np.bincount(flat, weights=np.tile(X[:, j], m),
                                   minlength=m * n_groups).reshape(m, n_groups)
    return out


def permuted_labels(labels: np.ndarray, strata: np.ndarray | None, n_perm: int,
                    seed: int = DEFAULT_SEED) -> np.ndarray:
    """(n_perm, n) label vectors, each a uniformly random permutation of ``labels``
    within every stratum (the multiset of labels of each stratum is kept).
    Seeded and cached on (labels, strata, n_perm, seed), read-only."""
    labels = np.ascontiguousarray(labels, dtype=np.int64)
    strata = (np.zeros(len(labels), dtype=np.int64) if strata is None
              else np.ascontiguousarray(strata, dtype=np.int64))
    return _permuted(labels.tobytes(), strata.tobytes(), int(n_perm), int(seed))


@functools.lru_cache(maxsize=16)
def _permuted(labels_b: bytes, strata_b: bytes, n_perm: int, seed: int) -> np.ndarray:
    labels = np.frombuffer(labels_b, dtype=np.int64)
    strata = np.frombuffer(strata_b, dtype=np.int64)
    n = len(labels)
    order = np.argsort(strata, kind="stable")
    s_sorted = strata[order].astype(np.float64)
    lab_sorted = labels[order]
    rng = np.random.default_rng(seed)
    out = np.empty((n_perm, n), dtype=np.int64)
    for start in range(0, n_perm, _CHUNK):
        m = min(_CHUNK, n_perm - start)
        # stratum code + U(0, 1): sorting keeps the strata in blocks and shuffles
        # each block uniformly (ties have probability 0)
        perm = np.argsort(s_sorted[None, :] + rng.random((m, n)), axis=1)
        out[start:start + m][:, order] = lab_sorted[perm]
    out.flags.writeable = False
    return out


def permutation_test(
    X: np.ndarray,
    labels: Sequence | np.ndarray,
    statistic: Callable[[np.ndarray], np.ndarray],
    strata: Sequence | np.ndarray | None = None,
    units: Sequence | np.ndarray | None = None,
    n_perm: int = DEFAULT_N_PERM,
    seed: int = DEFAULT_SEED,
    name: str = "",
) -> PermutationResult:
    """Permutation p-value of ``statistic`` under "labels carry no information".

    ``X``: (n, k) per-row values; ``labels``: the group of each row (any sortable
    labels); ``statistic``: maps (m, G, k) group sums to m values (G = number of
    distinct labels, in sorted order), large = evidence of a difference; it may
    return inf (kept) or NaN (counted as not extreme). ``strata``: labels are
    permuted only within strata. ``units``: rows of one unit keep their common label
    and move together (a unit must lie in one stratum and carry one label).
    """
    return permutation_tests(X, labels, {name: statistic}, strata, units, n_perm, seed)[name]


def permutation_tests(
    X: np.ndarray,
    labels: Sequence | np.ndarray,
    statistics: Mapping[str, Callable[[np.ndarray], np.ndarray]],
    strata: Sequence | np.ndarray | None = None,
    units: Sequence | np.ndarray | None = None,
    n_perm: int = DEFAULT_N_PERM,
    seed: int = DEFAULT_SEED,
) -> dict[str, PermutationResult]:
    """:func:`permutation_test` of several statistics of the same rows and labels: the
    permuted group sums are computed once for all of them (the same permutations)."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 1:
        X = X[:, None]
    lab, n_groups = cluster_codes(labels)
    st = None if strata is None else cluster_codes(strata)[0]
    if units is not None:
        X, unit_lab, st = _by_unit(X, lab, st, units)
        assert unit_lab is not None         # labels are always given
        lab = unit_lab
    obs_sums = group_sums(X, lab[None, :], n_groups)
    observed = {k: float(f(obs_sums)[0]) for k, f in statistics.items()}
    live = {k: v for k, v in observed.items() if np.isfinite(v) or np.isposinf(v)}
    extreme = dict.fromkeys(live, 0)
    if live:
        L = permuted_labels(lab, st, n_perm, seed)
        for start in range(0, n_perm, _CHUNK):
            S = group_sums(X, L[start:start + _CHUNK], n_groups)
            for k, obs in live.items():
                t = np.asarray(statistics[k](S), float)
                tol = 1e-12 * max(1.0, abs(obs)) if np.isfinite(obs) else 0.0
                with np.errstate(invalid="ignore"):
                    extreme[k] += int(np.sum(t >= obs - tol))
    return {k: (PermutationResult(k or "permutation", observed[k],
                                  (1.0 + extreme[k]) / (1.0 + n_perm), int(n_perm))
                if k in live else PermutationResult(k or "permutation", observed[k],
                                                    float("nan"), 0))
            for k in statistics}


def _by_unit(X: np.ndarray, lab: np.ndarray, st: np.ndarray | None,
             units: Sequence | np.ndarray
             ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Sum X over units; one label (and stratum) per unit, checked."""
    u, n_units = cluster_codes(units)
    Xu = np.zeros((n_units, X.shape[1]))
    np.add.at(Xu, u, X)
    out: list[np.ndarray | None] = []
    for what, codes in (("label", lab), ("stratum", st)):
        if codes is None:
            out.append(None)
            continue
        first = np.full(n_units, -1, dtype=np.int64)
        first[u[::-1]] = codes[::-1]
        if (first[u] != codes).any():
            raise ValueError(f"a unit holds rows of more than one {what}")
        out.append(first)
    return Xu, out[0], out[1]
