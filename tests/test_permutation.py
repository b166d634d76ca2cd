"""The permutation test against brute-force enumeration of every permutation."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from fairness_tests.stats.permutation import group_sums, permutation_test, permuted_labels


def abs_mean_gap(S):
    """|mean of group 1 - mean of group 0| from group sums [sum y, n]."""
    m = S[:, :, 0] / S[:, :, 1]
    return np.abs(m[:, 1] - m[:, 0])


def X_of(y):
    y = np.asarray(y, dtype=float)
    return np.column_stack([y, np.ones_like(y)])


def exact_p(y, labels, strata, stat):
    """Share of all within-stratum permutations of the labels whose statistic is at
    least the observed one (every permutation of every stratum, equally weighted)."""
    y, labels, strata = map(np.asarray, (y, labels, strata))
    X = X_of(y)
    obs = stat(group_sums(X, labels[None, :], 2))[0]
    blocks = [np.flatnonzero(strata == s) for s in np.unique(strata)]
    hits = total = 0
    for perms in itertools.product(*[itertools.permutations(b) for b in blocks]):
        lab = labels.copy()
        for b, p in zip(blocks, perms, strict=True):
            lab[b] = labels[list(p)]
        total += 1
        hits += stat(group_sums(X, lab[None, :], 2))[0] >= obs - 1e-12
    return hits / total


def within(p_mc, p_exact, B):
    # the +1 estimate (1 + K) / (1 + B) of p, K ~ Binomial(B, p): 4 standard errors
    return abs(p_mc - p_exact) <= 4 * math.sqrt(p_exact * (1 - p_exact) / B) + 1 / (B + 1)


def test_six_rows_no_strata_by_hand():
    # labels 0 0 0 1 1 1, y 1 1 1 0 0 0: |gap| = 1; of the C(6, 3) = 20 ways to place
    # the three 1-labels, only 2 split the y's perfectly (gap 1): exact p = 2/20 = 0.1
    y, labels = [1, 1, 1, 0, 0, 0], [0, 0, 0, 1, 1, 1]
    assert exact_p(y, labels, [0] * 6, abs_mean_gap) == pytest.approx(0.1)
    r = permutation_test(X_of(y), labels, abs_mean_gap, n_perm=20000, seed=1)
    assert r.value == 1.0 and r.n_permutations == 20000
    assert within(r.p_value, 0.1, 20000)


def test_six_rows_within_two_strata_against_enumeration():
    # two strata of three rows (y about 3 higher in stratum 1), labels 0 0 1 | 0 1 1:
    # 3! * 3! = 36 within-stratum permutations; in each stratum the 1-label sits on
    # the largest y in 1 of 3 positions, so the gap is largest in 1 of 9 cases
    y = [0.0, 0.1, 0.2, 3.0, 3.1, 3.2]
    labels = [0, 0, 1, 0, 1, 1]
    strata = [0, 0, 0, 1, 1, 1]
    p_exact = exact_p(y, labels, strata, abs_mean_gap)
    assert p_exact == pytest.approx(1 / 9)
    r = permutation_test(X_of(y), labels, abs_mean_gap, strata=strata, n_perm=20000, seed=2)
    assert within(r.p_value, p_exact, 20000)
    # ignoring the strata is a different (wrong) null distribution
    p_pooled = exact_p(y, labels, [0] * 6, abs_mean_gap)
    assert p_pooled != pytest.approx(p_exact)


def test_plus_one_correction_never_gives_zero():
    # one-sided signed gap: the observed arrangement is the single most extreme one
    # of 20 (exact p = 1/20); with only 9 permutations p >= 1/10 by construction
    def signed(S):
        m = S[:, :, 0] / S[:, :, 1]
        return m[:, 1] - m[:, 0]
    y, labels = [0, 0, 0, 1, 1, 1], [0, 0, 0, 1, 1, 1]
    assert exact_p(y, labels, [0] * 6, signed) == pytest.approx(1 / 20)
    r = permutation_test(X_of(y), labels, signed, n_perm=9, seed=0)
    assert r.p_value >= 1 / 10 and r.p_value == (1 + round(r.p_value * 10 - 1)) / 10


def test_permuted_labels_keep_each_stratum_multiset():
    labels = np.array([0, 1, 2, 0, 1, 1, 2, 2])
    strata = np.array([0, 0, 0, 1, 1, 1, 2, 2])
    L = permuted_labels(labels, strata, 300, seed=5)
    assert L.shape == (300, 8) and not L.flags.writeable
    for s in (0, 1, 2):
        m = strata == s
        assert (np.sort(L[:, m], axis=1) == np.sort(labels[m])).all()
    # stratum 0 holds three distinct labels: all 3! = 6 orders appear, about equally
    orders = {tuple(r) for r in L[:, :3]}
    assert len(orders) == 6
    assert (L == permuted_labels(labels, strata, 300, seed=5)).all()
    assert not (L == permuted_labels(labels, strata, 300, seed=6)).all()


def test_units_move_together():
    # 3 prompts per label (2 labels), 2 rows each: the unit-level test equals the
    # test on the unit sums (6 units, labels 0 0 0 1 1 1)
    y = np.array([1, 1, 1, 0, 1, 1, 0, 0, 0, 0, 1, 0], dtype=float)
    units = np.repeat(np.arange(6), 2)
    labels = np.repeat([0, 0, 0, 1, 1, 1], 2)
    r = permutation_test(X_of(y), labels, abs_mean_gap, units=units, n_perm=4000, seed=3)
    ysum = y.reshape(6, 2).sum(axis=1)
    Xu = np.column_stack([ysum, np.full(6, 2.0)])
    r2 = permutation_test(Xu, [0, 0, 0, 1, 1, 1], abs_mean_gap, n_perm=4000, seed=3)
    assert (r.value, r.p_value) == (r2.value, r2.p_value)
    with pytest.raises(ValueError, match="more than one label"):
        permutation_test(X_of(y), np.arange(12) % 2, abs_mean_gap, units=units)


def test_undefined_statistic_gives_undefined_p():
    r = permutation_test(X_of([1, 0]), [0, 0], lambda S: np.full(S.shape[0], np.nan))
    assert math.isnan(r.p_value) and r.n_permutations == 0
