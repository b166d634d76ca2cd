"""Declared expected-failure reasons that never quote a stale figure.

A thresholds file may declare ``expected_fail: {reason: ...}`` for a rule. A figure
written into that text (``smoothed DF 1.95 (95% CI 1.05-3.41)``) is true for the run
it was copied from and goes stale the moment the run changes. So a reason quotes the
run's figures only through placeholders, filled from the verdict row of the cell it
explains each time the rules are evaluated:

    ``{value}``    the compared metric's value in this cell (``|value|`` for ``abs`` rules)
    ``{ci_low}``   its 95% CI, lower end       ``{ci_high}``  upper end
    ``{ci}``       ``[ci_low, ci_high]``       ``{bound}``    the rule's bound
    ``{cell}``     the cell id

Numbers print with 4 significant digits (as the verdict's ``why`` does); NaN is
"undefined", inf "unbounded". ``{{`` and ``}}`` are literal braces. On load
(:func:`reason_problems`), an unknown placeholder, or a decimal figure or percentage
written out literally (``0.35``, ``53-61%``), is an error naming the figure: such a
figure would read as this run's when it is not. Whole numbers (``1/3``, ``20
repeats``) are allowed: they are usually facts of the protocol, not measurements.
"""
from __future__ import annotations

import math
import re
import string
from typing import Any, Mapping

#: the placeholders a declared reason may use, filled from its verdict row
REASON_FIELDS = ("value", "ci_low", "ci_high", "ci", "bound", "cell")
#: a percentage (53%, 61.5 %, 53-61%; not the "95% CI" of an interval) or a decimal
#: figure (0.35, .5, 1.05)
FIGURE = re.compile(r"(?<![\w.])(?:\d+(?:\.\d+)?(?:\s?[-\u2013]\s?\d+(?:\.\d+)?)?\s?%"
                    r"(?!\s*CI\b)|\d+\.\d+|\.\d+)")


def _fmt(x: Any) -> str:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return "undefined" if x is None else str(x)
    if math.isnan(v):
        return "undefined"
    if math.isinf(v):
        return "unbounded" if v > 0 else "-unbounded"
    return f"{v:.4g}"


def _parts(reason: str) -> list[tuple[str, str | None]]:
    """(literal text, placeholder name or None) pieces; ValueError on bad braces."""
    return [(lit, name) for lit, name, _, _ in string.Formatter().parse(reason)]


def reason_problems(reason: str) -> list[str]:
    """What is wrong with a declared reason: bad braces, unknown placeholders, literal
    figures (each message one sentence, with the fix)."""
    try:
        parts = _parts(reason)
    except ValueError as exc:
        return [f"{exc} (write {{{{ and }}}} for literal braces)"]
    out = []
    for _, name in parts:
        if name is not None and name not in REASON_FIELDS:
            out.append(f"unknown placeholder {{{name}}}; use one of "
                       + ", ".join(f"{{{f}}}" for f in REASON_FIELDS))
    figures = [m.group(0).strip() for lit, _ in parts for m in FIGURE.finditer(lit)]
    if figures:
        out.append(f"quotes the figure(s) {', '.join(figures)}, which go stale when the run "
                   "changes: write {value}, {ci}, {ci_low}, {ci_high} or {bound} (filled in "
                   "from each run's verdict for the cell) or leave the figure out")
    return out


def fill_reason(reason: str | None, row: Mapping[str, Any]) -> str | None:
    """``reason`` with its placeholders replaced by the verdict row's figures."""
    if not reason:
        return reason
    values = {k: _fmt(row.get(k)) for k in ("value", "ci_low", "ci_high", "bound")}
    values["ci"] = f"[{values['ci_low']}, {values['ci_high']}]"
    values["cell"] = str(row.get("cell", ""))
    try:
        return reason.format_map(values)
    except (KeyError, ValueError, IndexError):
        return reason            # a reason not checked on load: shown as declared
