"""The comparison's figures, inline SVG drawn by :mod:`fairness_tests.card.svg` from the
sections' :class:`~fairness_tests.pipeline.views.Figure` (its kind names the drawing, its
arguments are the numbers of the long table: the runs' own table rows, never anything
recomputed), rounded as the card rounds (:func:`fairness_tests.card.values.clean`).
"""
from __future__ import annotations

from typing import Any, Callable

from fairness_tests.card import svg
from fairness_tests.card.values import clean
from fairness_tests.pipeline.views import Figure

#: the drawings a figure may name
DRAWINGS: dict[str, Callable[..., str]] = {"dot_ci": svg.dot_ci, "bars_ref": svg.bars_ref,
                                           "grouped_bars": svg.grouped_bars}


def _point(p: dict) -> dict:
    return {**p, **{k: clean(p[k]) for k in ("value", "lo", "hi") if k in p}}


def _args(args: dict[str, Any]) -> dict[str, Any]:
    out = dict(args)
    for key in ("points", "bars"):
        if key in out:
            out[key] = [_point(p) for p in out[key]]
    if "values" in out:
        out["values"] = [[clean(v) for v in row] for row in out["values"]]
    return out


def draw(fig: Figure) -> str:
    """The figure as inline SVG."""
    if fig.kind not in DRAWINGS:
        raise ValueError(f"unknown figure kind {fig.kind!r} (known: {', '.join(DRAWINGS)})")
    return DRAWINGS[fig.kind](**_args(fig.args))
