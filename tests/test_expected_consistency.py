"""Exact expected consistency against brute-force enumeration of every answer
sequence (n <= 6), and the goodness-of-fit test's size and power."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from fairness_tests.metrics.expected_consistency import (
    compositions,
    distribution,
    expected_max_count,
    expected_per_item,
    goodness_of_fit,
    goodness_of_fit_cells,
)


def brute_force(p, n_all, v, label, unknown, target):
    """E[max valid count], E[label count] and P(flagged), given v of the n_all answers
    valid, over all 4^n_all answer sequences (3 = invalid) with exactly v valid ones
    (without invalid mass only v = n_all can happen: then the 4^v sequences)."""
    if p[3] == 0:
        n_all = v
    e_max = e_lab = p_flag = total = 0.0
    for seq in itertools.product(range(4), repeat=n_all):
        counts = np.bincount(seq, minlength=4)
        if counts[:3].sum() != v:
            continue
        pr = math.prod(p[a] for a in seq)
        total += pr
        e_max += pr * counts[:3].max()
        e_lab += pr * counts[label]
        stereo_wrong = target not in (label, unknown)
        p_flag += pr * (stereo_wrong and counts[target] > 0)
    return e_max / total, e_lab / total, p_flag / total


@pytest.mark.parametrize("n_all,v", [(2, 2), (3, 2), (3, 3), (5, 4), (6, 6), (6, 3)])
def test_expected_consistency_equals_enumeration(n_all, v):
    """Issue 32: the expectations are over VALID answers, given the item's number v of
    them (the third item has 5% invalid mass; before, invalid was an answer of its
    own and the expectation ran over all n answers)."""
    letter = [[0.5, 0.3, 0.15], [0.9, 0.1, 0.0], [0.2, 0.2, 0.6], [1 / 3, 1 / 3, 1 / 3],
              [0.0, 0.0, 1.0], [0.25, 0.25, 0.0]]
    label, unknown, target = [0, 1, 2, 0, 2, 0], [2, 2, 0, 1, 0, 2], [1, 0, 1, 0, 1, 1]
    out = expected_per_item(letter, label, unknown, target, v)
    for i, lp in enumerate(letter):
        p = [*lp, 1 - sum(lp)]
        e_max, e_lab, p_flag = brute_force(p, n_all, v, label[i], unknown[i], target[i])
        assert out["mfaa_expected"][i] == pytest.approx(100 * e_max / v, abs=1e-10)
        assert out["gtc_expected"][i] == pytest.approx(100 * e_lab / v, abs=1e-10)
        assert out["p_flagged"][i] == pytest.approx(p_flag, abs=1e-12)


def test_expected_consistency_by_hand_over_valid_answers():
    """p = (0.25, 0.25, 0, invalid 0.5), two valid answers: given valid, a and b are
    1/2 each, so E[max count] = 2 * 1/2 + 1 * 1/2 = 1.5, MFAA 75% (counting invalid as
    an answer of its own over n = 2 it was (2 * (1/16 + 1/16 + 1/4) + 1 * 10/16) / 2 =
    68.75%); GTC 50% (was 25%); P(flagged), target b: 1 - (1/2)^2 = 0.75 (was 0.4375).
    Fewer than two valid answers: undefined."""
    out = expected_per_item([[0.25, 0.25, 0.0]], [0], [2], [1], 2)
    assert out["mfaa_expected"][0] == pytest.approx(75.0)
    assert out["gtc_expected"][0] == pytest.approx(50.0)
    assert out["p_flagged"][0] == pytest.approx(0.75)
    one = expected_per_item([[0.25, 0.25, 0.0]], [0], [2], [1], 1)
    assert one.isna().all(axis=None)
    none = expected_per_item([[0.0, 0.0, 0.0]], [0], [2], [1], 5)     # no option mass
    assert none.isna().all(axis=None)


def test_expected_mfaa_by_hand():
    # two equally likely answers, n = 2: max count 2 with prob 1/2, 1 with prob 1/2
    # -> E[max] = 1.5, MFAA = 75%
    assert expected_max_count([[0.5, 0.5, 0.0, 0.0]], 2)[0] == pytest.approx(1.5)
    # a deterministic answer: MFAA = 100% for any n
    assert expected_max_count([[0.0, 1.0, 0.0, 0.0]], 20)[0] == pytest.approx(20.0)


def test_compositions_count_and_sum():
    C, logc = compositions(20, 4)
    assert C.shape == (math.comb(23, 3), 4) and (C.sum(axis=1) == 20).all()
    assert len({tuple(r) for r in C}) == len(C)
    assert np.exp(logc).sum() == pytest.approx(4.0 ** 20)      # sum of coefficients


def test_distribution_adds_invalid_mass_and_checks_input():
    P = distribution([[0.5, 0.3, 0.1]])
    assert P[0] == pytest.approx([0.5, 0.3, 0.1, 0.1])
    with pytest.raises(ValueError, match="more than 1"):
        distribution([[0.6, 0.6, 0.1]])
    with pytest.raises(ValueError, match="3 values"):
        distribution([[0.5, 0.5]])


def test_goodness_of_fit_holds_its_size_and_catches_a_cache():
    rng = np.random.default_rng(0)
    P = distribution(rng.dirichlet([2, 2, 2], size=40) * 0.97)
    # repeats drawn from the stated distributions: p roughly uniform; a cache
    # (every repeat identical to the first) is caught
    ps = []
    for s in range(60):
        obs = np.random.default_rng(s).multinomial(20, P)
        ps.append(goodness_of_fit(obs, P, n_sim=500, seed=s).p_value)
    assert 0.01 < np.mean(np.array(ps) < 0.1) < 0.25           # nominal 0.10
    first = np.array([np.random.default_rng(i).choice(4, p=P[i]) for i in range(40)])
    cached = np.zeros((40, 4))
    cached[np.arange(40), first] = 20
    r = goodness_of_fit(cached, P, n_sim=500)
    assert r.p_value == pytest.approx(1 / 501) and r.df == 40 * 3
    # an answer the distribution gives probability 0: impossible, X^2 infinite
    obs = np.random.default_rng(1).multinomial(20, P)
    P0 = P.copy()
    P0[0] = [1.0, 0.0, 0.0, 0.0]
    obs[0] = [19, 1, 0, 0]
    assert math.isinf(goodness_of_fit(obs, P0, n_sim=100).statistic)


def test_cells_share_one_draw_and_each_is_its_own_fit():
    """goodness_of_fit_cells (issue 24: one parametric-bootstrap draw for the 27 cells of
    a consistency table): a cell's X^2 is the sum of its items' terms and its df the sum
    of their (k_i - 1), computed here by hand; the all-items cell is exactly the one-cell
    test with the same seed; each cell's p-value agrees with the one-cell test of its
    own items within the Monte Carlo error of two independent estimates."""
    rng = np.random.default_rng(3)
    P = distribution(rng.dirichlet([2, 2, 2], size=30) * 0.95)
    P[5] = [0.6, 0.4, 0.0, 0.0]                       # two options impossible: k_5 = 2
    obs = rng.multinomial(12, P).astype(float)
    cells = np.array([np.ones(30, bool), np.arange(30) < 10, np.arange(30) % 3 == 0])
    fits = goodness_of_fit_cells(obs, P, cells, n_sim=4000, seed=11)
    for m, fit in zip(cells, fits, strict=True):
        E = obs[m].sum(axis=1, keepdims=True) * P[m]
        pos = E > 0
        x2 = float((((obs[m] - E) ** 2)[pos] / E[pos]).sum())
        assert fit.statistic == pytest.approx(x2, rel=1e-12)
        assert fit.df == int(((P[m] > 0).sum(axis=1) - 1).sum())
        alone = goodness_of_fit(obs[m], P[m], n_sim=4000, seed=12)
        se = math.sqrt(2 * alone.p_value * (1 - alone.p_value) / 4000) + 1 / 4000
        assert abs(fit.p_value - alone.p_value) < 4 * se
    one = goodness_of_fit(obs, P, n_sim=4000, seed=11)
    assert (fits[0].statistic, fits[0].df, fits[0].p_value) == \
        (one.statistic, one.df, one.p_value)
