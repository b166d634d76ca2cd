"""A family's records as the explorer shows them: the family's :class:`ExploreView`
(its hook :meth:`fairness_tests.pipeline.benchmark.Family.explore`), with what it leaves
out inferred from the records, and each answer's outcome.

Inferred (generic, for a family that declares nothing):

- flags: the numeric columns whose values are all 0 or 1 (missing ones aside);
- text: the text columns longer than :data:`LONG_TEXT` characters on average;
- key: the first column when its values are unique, else every column that is not a
  flag, a text, the answer or a float;
- outcome of an answer: the first declared ``(label, column, nonzero)`` that holds,
  else ``otherwise``; with none declared, the flags set to 1 joined by "+" ("none").
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from fairness_tests.core.registry import load
from fairness_tests.pipeline.benchmark import ExploreView, Family, families

LONG_TEXT = 40          # mean characters above which a text column is shown in full


@dataclass
class View:
    """One family's records, resolved: ``frame`` and ``outcome`` (one label per row),
    the declarations of :class:`ExploreView` with the inferred ones filled in."""
    name: str
    frame: pd.DataFrame
    outcome: pd.Series
    key: list[str]
    answer: str | None
    text: list[str]
    flags: list[str]
    correct: str | None
    cluster: str | None
    highlight: dict[str, str] = field(default_factory=dict)
    first: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def family_class(records: str) -> type[Family]:
    """The :class:`Family` whose spec names ``records`` (the base class when none does:
    its default view)."""
    for spec in families():
        if spec.records == records:
            cls: type[Family] = load(spec.impl)
            return cls
    return Family


def views(run) -> dict[str, View]:
    """Every records table of ``run`` (a RunResult), as its family shows it."""
    return {name: resolve(name, family_class(name).explore(records, run.metadata))
            for name, records in sorted(run.records.items())}


def flag_columns(frame: pd.DataFrame) -> list[str]:
    """The numeric columns whose non-missing values are all 0 or 1 (and some are)."""
    out = []
    for c in frame.columns:
        s = frame[c]
        if pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s):
            v = s.dropna()
            if len(v) and bool(v.isin([0, 1]).all()):
                out.append(c)
    return out


def text_columns(frame: pd.DataFrame) -> list[str]:
    """The text columns longer than :data:`LONG_TEXT` characters on average."""
    out = []
    for c in frame.columns:
        s = frame[c]
        if not pd.api.types.is_numeric_dtype(s):
            lengths = s.dropna().astype(str).str.len()
            if len(lengths) and float(lengths.mean()) > LONG_TEXT:
                out.append(c)
    return out


def resolve(name: str, v: ExploreView) -> View:
    """``v`` with what it leaves out inferred from its frame (module docstring)."""
    frame = v.frame.reset_index(drop=True)
    flags = flag_columns(frame)
    text = list(v.text) or text_columns(frame)
    key = list(v.key) or _key(frame, flags, text, v.answer)
    return View(name=name, frame=frame, outcome=outcomes(frame, v, flags), key=key,
                answer=v.answer, text=text, flags=flags, correct=v.correct,
                cluster=v.cluster, highlight=dict(v.highlight),
                first={k: str(x) for k, x in v.first.items()}, notes=list(v.notes))


def _key(frame: pd.DataFrame, flags: list[str], text: list[str],
         answer: str | None) -> list[str]:
    first = frame.columns[0] if len(frame.columns) else None
    if first is not None and frame[first].is_unique:
        return [first]
    return [c for c in frame.columns if c not in flags and c not in text and c != answer
            and not pd.api.types.is_float_dtype(frame[c])]


def outcomes(frame: pd.DataFrame, v: ExploreView, flags: list[str]) -> pd.Series:
    """One outcome label per row (module docstring)."""
    if v.outcomes:
        label = np.full(len(frame), v.otherwise or "other", dtype=object)
        done = np.zeros(len(frame), dtype=bool)
        for name, col, nonzero in v.outcomes:
            if col not in frame.columns:
                continue
            x = pd.to_numeric(frame[col], errors="coerce")
            hit = ((x.fillna(0) != 0) if nonzero else (x == 0)).to_numpy() & ~done
            label[hit] = name
            done |= hit
        return pd.Series(label, index=frame.index)
    if not flags:
        return pd.Series("", index=frame.index, dtype=object)
    on = frame[flags].fillna(0).to_numpy() != 0
    return pd.Series(["+".join(f for f, b in zip(flags, row, strict=True) if b) or "none"
                      for row in on], index=frame.index, dtype=object)
