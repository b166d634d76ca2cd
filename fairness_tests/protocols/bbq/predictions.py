"""Read a BBQ predictions file (JSONL, one answer a line) into the predictions table.

A line: ``{"category": "Race_x_SES", "example_id": 17, "repeat": 0, "answer": 1}``
(``answer`` 0, 1, 2 in the dataset's option order, or null for invalid; ``repeat``
defaults to 0; an optional ``rotation`` 0-2 says which cyclic option order was
shown, default 0; an optional ``letter_probs`` ``[p0, p1, p2]`` is the answer
distribution in the ORIGINAL option order (for the exact expected MFAA / GTC of
:mod:`fairness_tests.metrics.expected_consistency`; 1 - sum = invalid answers).
Every fault is a DataError naming the file and line: bad JSON,
a missing or mistyped field, an answer outside 0-2, a duplicate (category,
example_id, repeat, rotation).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from fairness_tests.core.errors import DataError
from fairness_tests.core.io import json_lines

COLUMNS = ["dataset", "example_id", "repeat", "rotation", "answer", "letter_probs", "line"]


def _probs(value, path, line):
    """``letter_probs``: three probabilities summing to at most 1 (or null)."""
    if value is None:
        return None
    ok = (isinstance(value, list) and len(value) == 3
          and all(isinstance(x, (int, float)) and not isinstance(x, bool) and 0 <= x <= 1
                  for x in value) and sum(value) <= 1 + 1e-6)
    if not ok:
        raise DataError(f"letter_probs must be three probabilities [p0, p1, p2] (original "
                        f"option order) summing to at most 1, got {value!r}", path=path,
                        line=line, key="letter_probs")
    return [float(x) for x in value]


def _int(value, path, line, key, lo=0, hi=None):
    if isinstance(value, bool) or not isinstance(value, int) or value < lo or \
            (hi is not None and value > hi):
        rng = f"{lo}..{hi}" if hi is not None else f">= {lo}"
        raise DataError(f"{key} must be an integer {rng}, got {value!r}", path=path, line=line,
                        key=key)
    return value


def read_predictions(path: str | Path) -> pd.DataFrame:
    """The predictions table (:data:`COLUMNS`; answer NaN = invalid)."""
    path = Path(path)
    if not path.is_file():
        raise DataError("predictions file not found", path=path)
    records, numbers = json_lines(path)
    if not records:
        raise DataError("no predictions: the file holds no JSON line", path=path)
    ds, eid, rep, rot, ans, probs, lines = [], [], [], [], [], [], []
    for r, no in zip(records, numbers.tolist()):
        cat = r.get("category", r.get("dataset"))
        if not isinstance(cat, str) or not cat:
            raise DataError("missing \"category\"", path=path, line=no, key="category")
        if "example_id" not in r:
            raise DataError("missing \"example_id\"", path=path, line=no, key="example_id")
        if "answer" not in r:
            raise DataError("missing \"answer\" (use null for an invalid answer)", path=path,
                            line=no, key="answer")
        a = r["answer"]
        if a is not None:
            _int(a, path, no, "answer", 0, 2)
        ds.append(cat)
        eid.append(_int(r["example_id"], path, no, "example_id"))
        rep.append(_int(r.get("repeat", 0), path, no, "repeat"))
        rot.append(_int(r.get("rotation", 0), path, no, "rotation", 0, 2))
        ans.append(np.nan if a is None else float(a))
        probs.append(_probs(r.get("letter_probs"), path, no))
        lines.append(no)
    df = pd.DataFrame({"dataset": ds, "example_id": np.array(eid, dtype=np.int64),
                       "repeat": np.array(rep, dtype=np.int64),
                       "rotation": np.array(rot, dtype=np.int64),
                       "answer": np.array(ans, dtype=np.float64),
                       "letter_probs": pd.Series(probs, dtype=object),
                       "line": np.array(lines, dtype=np.int64)}, columns=COLUMNS)
    dup = df.duplicated(["dataset", "example_id", "repeat", "rotation"])
    if dup.any():
        row = df[dup].iloc[0]
        first = df[(df["dataset"] == row["dataset"]) & (df["example_id"] == row["example_id"])
                   & (df["repeat"] == row["repeat"]) & (df["rotation"] == row["rotation"])]
        raise DataError(f"duplicate answer for {row['dataset']} example_id "
                        f"{int(row['example_id'])} repeat {int(row['repeat'])} rotation "
                        f"{int(row['rotation'])} (first on line {int(first['line'].iloc[0])})",
                        path=path, line=int(row["line"]))
    return df


def check_against(preds: pd.DataFrame, loaded: pd.DataFrame, path: str | Path) -> None:
    """Every prediction must name a loaded dataset (category) and one of its items: a
    DataError names the line, the bad value and the closest valid category."""
    import difflib

    datasets = sorted(loaded["dataset"].unique())
    unknown = ~preds["dataset"].isin(datasets)
    if unknown.any():
        row = preds[unknown].iloc[0]
        close = difflib.get_close_matches(row["dataset"], datasets, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise DataError(f"unknown category {row['dataset']!r}{hint}; the loaded BBQ data has "
                        f"{', '.join(datasets)} ({int(unknown.sum())} such lines)", path=path,
                        line=int(row["line"]), key="category")
    known = pd.MultiIndex.from_frame(loaded[["dataset", "example_id"]])
    bad = ~pd.MultiIndex.from_frame(preds[["dataset", "example_id"]]).isin(known)
    if bad.any():
        row = preds[bad].iloc[0]
        raise DataError(f"{row['dataset']} example_id {int(row['example_id'])} is not in the "
                        f"BBQ data ({int(bad.sum())} such lines)", path=path,
                        line=int(row["line"]), key="example_id")
