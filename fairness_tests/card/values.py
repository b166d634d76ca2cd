"""Fixed number formatting and table conversion for cards (determinism lives here).

Numbers in a card are rounded to 6 significant digits (so the same run always
writes the same text, whatever the float noise below that); NaN becomes ``None``
(undefined; the row's ``note`` says why) and inf becomes ``"UB"``
(:func:`fairness_tests.core.fmt.json_value`). Rendered text shows 3 decimals.
"""
from __future__ import annotations

import datetime as _dt
import math
from typing import Any

import numpy as np
import pandas as pd

from fairness_tests.core.fmt import json_value

SIG_DIGITS = 6


def clean(x: Any) -> Any:
    """A JSON/YAML-safe, deterministic scalar or structure."""
    if isinstance(x, dict):
        return {str(k): clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [clean(v) for v in x]
    if x is None or x is pd.NA or x is pd.NaT:
        return None
    if isinstance(x, (_dt.date, _dt.datetime)):
        return x.isoformat()
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        v = json_value(float(x))
        if isinstance(v, float):
            return float(f"{v:.{SIG_DIGITS}g}")
        return v
    if isinstance(x, str):
        return x
    return str(x)


def records(df: pd.DataFrame) -> list[dict]:
    """A metric table as a list of cleaned row dicts, in table order; a
    whole-number float column that only holds counts (``n``) becomes int. An empty
    string is None, as the same table read back from its CSV has it (so a card from a
    run in memory equals the card from the saved run); ``note`` is always a string."""
    out = []
    cols = list(df.columns)
    for row in df.itertuples(index=False, name=None):
        rec = {}
        for c, v in zip(cols, row, strict=True):
            v = clean(v)
            if v == "":
                v = None
            if c == "n" and isinstance(v, float) and v.is_integer():
                v = int(v)
            if c == "note" and v is None:
                v = ""
            rec[str(c)] = v
        out.append(rec)
    return out


def num(x: Any, digits: int = 3) -> str:
    """Text for a card number: ``0.123``, ``UB``, ``n/a`` (undefined)."""
    if x is None:
        return "n/a"
    if isinstance(x, str):
        return x
    if isinstance(x, bool):
        return str(x).lower()
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        if math.isnan(x):
            return "n/a"
        if math.isinf(x):
            return "UB" if x > 0 else "-UB"
        if x.is_integer() and abs(x) >= 1000:
            return f"{int(x)}"
        return f"{x:.{digits}f}"
    return str(x)


def ci(lo: Any, hi: Any, digits: int = 3) -> str:
    if lo is None and hi is None:
        return ""
    return f"[{num(lo, digits)}, {num(hi, digits)}]"


def get_path(d: Any, path: str) -> Any:
    """``d["a"]["b"]`` for ``path`` "a.b"; None where a key is absent."""
    for part in path.split("."):
        if not isinstance(d, dict) or part not in d:
            return None
        d = d[part]
    return d
