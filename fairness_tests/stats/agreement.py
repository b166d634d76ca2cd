"""Agreement of two binary raters (two scorers of the same generations).

Over the items both raters scored (a NaN on either side leaves the item out), with
``n11`` (both 1), ``n10`` (a 1, b 0), ``n01`` (a 0, b 1), ``n00`` (both 0) and
``n = n11 + n10 + n01 + n00``:

- raw agreement ``p_o = (n11 + n00) / n``;
- chance agreement ``p_e = p_a p_b + (1 - p_a)(1 - p_b)``, with ``p_a = (n11 + n10) / n``
  and ``p_b = (n11 + n01) / n``;
- Cohen's kappa ``kappa = (p_o - p_e) / (1 - p_e)``; undefined (NaN) when ``p_e = 1``
  (both raters constant and equal: agreement cannot be told from chance).

Intervals: the project's one bootstrap (:func:`fairness_tests.stats.bootstrap.bootstrap`)
of kappa and of ``p_o`` recomputed from the resampled four counts; with ``clusters``
(the generative prompt) whole clusters are resampled, as the generative intervals do.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from fairness_tests.stats.bootstrap import (
    DEFAULT_N_BOOT,
    DEFAULT_SEED,
    Estimate,
    bootstrap_all,
)

NAN = float("nan")


@dataclass(frozen=True)
class Agreement:
    """The confusion counts, raw agreement and kappa (with their intervals)."""
    n11: int
    n10: int
    n01: int
    n00: int
    raw: Estimate
    kappa: Estimate

    @property
    def n(self) -> int:
        return self.n11 + self.n10 + self.n01 + self.n00


def _cells(s: np.ndarray) -> tuple[np.ndarray, ...]:
    return s[:, 0], s[:, 1], s[:, 2], s[:, 3]


def raw_stat(s: np.ndarray) -> np.ndarray:
    """p_o from rows of counts (n11, n10, n01, n00)."""
    n11, n10, n01, n00 = _cells(s)
    n = n11 + n10 + n01 + n00
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, (n11 + n00) / n, np.nan)


def kappa_stat(s: np.ndarray) -> np.ndarray:
    """Cohen's kappa from rows of counts (n11, n10, n01, n00); NaN where p_e = 1."""
    n11, n10, n01, n00 = _cells(s)
    n = n11 + n10 + n01 + n00
    with np.errstate(invalid="ignore", divide="ignore"):
        po = (n11 + n00) / n
        pa, pb = (n11 + n10) / n, (n11 + n01) / n
        pe = pa * pb + (1 - pa) * (1 - pb)
        out = (po - pe) / (1 - pe)
    return np.where((n > 0) & (np.abs(1 - pe) > 1e-12), out, np.nan)


def agreement(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray,
              clusters: Sequence | np.ndarray | None = None, n_boot: int = DEFAULT_N_BOOT,
              seed: int = DEFAULT_SEED) -> Agreement:
    """:class:`Agreement` of two 0/1 vectors (NaN: not scored, left out)."""
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    both = ~np.isnan(xa) & ~np.isnan(xb)
    xa, xb = xa[both], xb[both]
    X = np.column_stack([xa * xb, xa * (1 - xb), (1 - xa) * xb, (1 - xa) * (1 - xb)])
    cl = None if clusters is None else np.asarray(clusters)[both]
    est = bootstrap_all(X, {"p_o": raw_stat, "cohen": kappa_stat}, n_boot, seed, clusters=cl)
    counts = X.sum(axis=0).astype(int) if len(X) else np.zeros(4, dtype=int)
    n11, n10, n01, n00 = (int(c) for c in counts)
    return Agreement(n11, n10, n01, n00, est["p_o"], est["cohen"])
