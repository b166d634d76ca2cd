"""Two runs on the same items: which answers changed, how, and which templates moved
the paired difference of a gate cell.

Answers are paired on the family's key (:attr:`View.key`). A pair *changed* when its
answer (:attr:`View.answer`, as text) or its outcome differs. Its class names the
change: ``"<baseline outcome> → <candidate outcome>"`` when the outcomes differ, else
``"answer changed (<outcome>)"``; then ``"; correct → wrong"`` (or ``"; wrong →
correct"``) when the family's ``correct`` flag changed.

Per gate cell (its items found as a verdict's are: :func:`fairness_tests.explore.cells.
link`, on the baseline's tables and records): the pairs in the cell, the changed ones
and their classes counted, and per template (``View.cluster``) the contribution to the
paired difference of each flag's mean over the cell's first answers (``View.first``:
an item counted once, as its metrics count it)::

    contribution_k(f) = sum over the pairs i of template k (f_cand(i) - f_base(i)) / N

with N the cell's paired first answers, so the contributions of the templates sum to the cell's
difference of the flag's mean (accuracy for ``correct``, the stereotype rate for
``stereotype``). Metrics that are not means of one flag (bias scores, SF, DF) are not
split this way: their flags' contributions show which templates moved them.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pandas as pd

from fairness_tests.explore.bundle import number
from fairness_tests.explore.cells import as_text, in_cell, link
from fairness_tests.explore.views import View

ARROW = " \u2192 "


def pair_rows(b: View, c: View) -> tuple[np.ndarray, np.ndarray]:
    """Row indices (baseline, candidate) of the answers both runs have, in the
    baseline's order."""
    key = [k for k in b.key if k in c.frame.columns]
    if not key:
        return np.zeros(0, dtype=int), np.zeros(0, dtype=int)
    left = pd.DataFrame({k: as_text(b.frame[k]) for k in key}).assign(_b=np.arange(len(b.frame)))
    right = pd.DataFrame({k: as_text(c.frame[k]) for k in key}).assign(_c=np.arange(len(c.frame)))
    m = left.merge(right.drop_duplicates(key), on=key, how="inner", sort=False)
    return m["_b"].to_numpy(dtype=int), m["_c"].to_numpy(dtype=int)


def change_classes(b: View, c: View, ib: np.ndarray, ic: np.ndarray) -> list[str]:
    """Per pair: its class (module docstring), "" when it did not change."""
    ob = b.outcome.to_numpy()[ib]
    oc = c.outcome.to_numpy()[ic]
    if b.answer and b.answer in b.frame and c.answer in c.frame:
        ab = as_text(b.frame[b.answer]).to_numpy()[ib]
        ac = as_text(c.frame[str(c.answer)]).to_numpy()[ic]
    else:
        ab = ac = np.full(len(ib), "", dtype=object)
    corr = b.correct if b.correct and b.correct in c.frame and b.correct in b.frame else None
    cb = _flag(b.frame, corr)[ib] if corr else None
    cc = _flag(c.frame, corr)[ic] if corr else None
    out = []
    for i in range(len(ib)):
        if ob[i] == oc[i] and ab[i] == ac[i]:
            out.append("")
            continue
        text = f"{ob[i]}{ARROW}{oc[i]}" if ob[i] != oc[i] else f"answer changed ({ob[i]})"
        if cb is not None and cc is not None and cb[i] != cc[i]:
            text += "; " + ("correct" + ARROW + "wrong" if cb[i] else "wrong" + ARROW + "correct")
        out.append(text)
    return out


def _flag(frame: pd.DataFrame, col: str) -> np.ndarray:
    return pd.to_numeric(frame[col], errors="coerce").fillna(0).to_numpy(dtype=float)


def contributions(b: View, c: View, ib: np.ndarray, ic: np.ndarray,
                  classes: list[str]) -> list[dict[str, Any]]:
    """Per template of the pairs ``ib``/``ic`` (one cell; ``classes`` theirs):
    ``cluster``, ``n``, ``changed`` (pairs) and ``delta`` ``{flag: contribution}``
    (module docstring), the templates with a changed pair only, largest absolute
    contribution of the first flag (``correct`` when declared) first."""
    if not b.cluster or b.cluster not in b.frame or not len(ib):
        return []
    flags = [f for f in ([b.correct] if b.correct else []) + b.flags
             if f and f in c.frame.columns]
    flags = list(dict.fromkeys(flags))
    n = len(ib)
    diff = {f: _flag(c.frame, f)[ic] - _flag(b.frame, f)[ib] for f in flags}
    cl = as_text(b.frame[b.cluster]).to_numpy()[ib]
    out: list[dict[str, Any]] = []
    for k in dict.fromkeys(cl):
        sel = cl == k
        d = {f: float(diff[f][sel].sum()) / n for f in flags}
        moved = int(sum(1 for x, on in zip(classes, sel, strict=True) if on and x))
        if moved:
            out.append({"cluster": str(k), "n": int(sel.sum()), "changed": moved,
                        "delta": {f: number(v) for f, v in d.items()}})
    first = flags[0] if flags else None
    out.sort(key=lambda r: (-abs(r["delta"].get(first) or 0) if first else 0, -r["changed"]))
    return out


def pair_bundle(base_run, b_views: dict[str, View], c_views: dict[str, View], gate: pd.DataFrame,
                by_rule: dict[str, tuple[str, str | None, str]]) -> dict[str, Any]:
    """The two runs' pairs per records table and the gate's cells with their changed
    items: ``{"pairs": {records: {"b": [...], "c": [...], "class": [...]}}, "cells":
    [...], "gate": [rows]}``; a gate row's ``cell_index`` points into ``cells``."""
    pairs: dict[str, Any] = {}
    frames = {n: v.frame for n, v in b_views.items()}
    for name, b in b_views.items():
        c = c_views.get(name)
        if c is None:
            continue
        ib, ic = pair_rows(b, c)
        pairs[name] = {"b": ib.tolist(), "c": ic.tolist(), "class": change_classes(b, c, ib, ic)}
    cells: list[dict[str, Any]] = []
    index: dict[tuple, int] = {}
    rows = []
    for r in gate.to_dict("records"):
        rule = "" if pd.isna(r.get("rule")) else str(r.get("rule"))
        where = link(base_run.tables, frames, by_rule, rule, str(r["metric"]), str(r["cell"]))
        key = (where.records, tuple(sorted(where.values.items())))
        if key not in index and where.records in pairs:
            index[key] = len(cells)
            cells.append(_cell(b_views[where.records], c_views[where.records],
                               pairs[where.records], where))
        rows.append({**{k: _json(v) for k, v in r.items()}, "cell_index": index.get(key)})
    return {"pairs": pairs, "cells": cells, "gate": rows}


def _cell(b: View, c: View, p: dict[str, Any], where) -> dict[str, Any]:
    ib, ic = np.asarray(p["b"], dtype=int), np.asarray(p["c"], dtype=int)
    mask = in_cell(b.frame, where.values)[ib] if len(ib) else np.zeros(0, dtype=bool)
    idx = np.flatnonzero(mask)
    classes = [p["class"][i] for i in idx]
    changed = [int(i) for i, k in zip(idx, classes, strict=True) if k]
    once = in_cell(b.frame, b.first)[ib[idx]] if len(idx) else np.zeros(0, dtype=bool)
    return {"records": where.records, "filter": where.values, "n_pairs": int(len(idx)),
            "changed": changed, "classes": dict(Counter(k for k in classes if k).most_common()),
            "first": b.first, "n_first": int(once.sum()),
            "clusters": contributions(b, c, ib[idx][once], ic[idx][once],
                                      [k for k, o in zip(classes, once, strict=True) if o])}


def _json(v: Any) -> Any:
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, float, np.integer, np.floating)):
        return number(v)
    return None if v is None or (isinstance(v, float) and np.isnan(v)) else str(v)
