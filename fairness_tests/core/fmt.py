"""The one family of number formatters: how every report, table and test id writes a
value.

A value is *undefined* (NaN or None: nothing was measured) or *unbounded* (``inf``: a
ratio over a zero denominator, e.g. DF with an empty group) or a number. JSON keeps
undefined as ``null`` and unbounded as ``"UB"`` / ``"-UB"`` (:func:`json_value`); text
writes undefined as a word the report chooses (``undefined``, ``n/a``, ``-``, ``null``)
and unbounded as ``UB`` (or a word the report chooses), else ``format(x, spec)``
(:func:`shown`); p-values with 3 decimals, 2 significant digits below 0.001
(:func:`shown_p`); fixed decimals never show ``-0.000`` (:func:`fixed`). Plain-text
tables: :func:`text_table`.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np


def json_value(x: object) -> object:
    """JSON-safe scalar: inf -> "UB", NaN -> None, numpy scalars -> Python."""
    if isinstance(x, (np.floating, float)):
        if math.isnan(x):
            return None
        if math.isinf(x):
            return "UB" if x > 0 else "-UB"
        return float(x)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    return x


def shown(x: object, spec: str = ".4g", undefined: str = "undefined",
          unbounded: str = "UB") -> str:
    """A value as reports print it: ``undefined`` for None or NaN, ``unbounded`` /
    ``-unbounded`` for an infinite value, else ``format(x, spec)``; a non-number as its
    text."""
    if x is None:
        return undefined
    try:
        v = float(x)  # type: ignore[arg-type]  # anything: a TypeError is the check
    except (TypeError, ValueError):
        return str(x)
    if math.isnan(v):
        return undefined
    if math.isinf(v):
        return unbounded if v > 0 else f"-{unbounded}"
    return format(v, spec)


def shown_p(x: object, undefined: str = "undefined") -> str:
    """A p-value as reports print it: 3 decimals, 2 significant digits below 0.001."""
    try:
        v = float(x)  # type: ignore[arg-type]  # anything: a TypeError is the check
    except (TypeError, ValueError):
        return undefined if x is None else str(x)
    return shown(v, ".2g" if v < 0.001 else ".3f", undefined)


def fixed(x: object, digits: int = 3, undefined: str = "n/a") -> str:
    """``digits`` decimals (:func:`shown`), a value that rounds to zero without its sign
    (``0.000``, never ``-0.000``)."""
    s = shown(x, f".{digits}f", undefined=undefined)
    return s[1:] if s.startswith("-") and set(s[1:]) <= set("0.") else s


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]], rule: bool = True) -> str:
    """Columns left-aligned, two spaces apart, each as wide as its widest cell (header
    included), a line of dashes under the header when ``rule``; no trailing blanks, no
    final newline."""
    cells = [list(header), *(list(r) for r in rows)]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
             for r in cells]
    if rule:
        lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def finite(x: Any) -> float | None:
    """The float value of x when it is a finite number, else None."""
    if isinstance(x, bool) or x is None or isinstance(x, str):
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None
