"""Read a BBQ predictions file (JSONL, one answer a line) into the predictions table.

A line: ``{"category": "Race_x_SES", "example_id": 17, "repeat": 0, "answer": 1}``
(``answer`` 0, 1, 2 in the dataset's option order, or null for invalid; ``repeat``
defaults to 0; an optional ``rotation`` 0-2 says which cyclic option order was
shown, default 0). Every fault is a DataError naming the file and line: bad JSON,
a missing or mistyped field, an answer outside 0-2, a duplicate (category,
example_id, repeat, rotation).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ...errors import DataError
from ...jsonl import json_lines

COLUMNS = ["dataset", "example_id", "repeat", "rotation", "answer", "line"]


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
    ds, eid, rep, rot, ans, lines = [], [], [], [], [], []
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
        lines.append(no)
    df = pd.DataFrame({"dataset": ds, "example_id": np.array(eid, dtype=np.int64),
                       "repeat": np.array(rep, dtype=np.int64),
                       "rotation": np.array(rot, dtype=np.int64),
                       "answer": np.array(ans, dtype=np.float64),
                       "line": np.array(lines, dtype=np.int64)}, columns=COLUMNS)
    dup = df.duplicated(["dataset", "example_id", "repeat", "rotation"])
    if dup.any():
        row = df[dup].iloc[0]
        raise DataError(f"duplicate answer for {row.dataset} example_id {row.example_id} "
                        f"repeat {row.repeat} rotation {row.rotation}", path=path,
                        line=int(row.line))
    return df


def check_against(preds: pd.DataFrame, loaded: pd.DataFrame, path: str | Path,
                  datasets: tuple[str, ...]) -> None:
    """A prediction for one of ``datasets`` whose example_id is not in the loaded
    data is a mismatch: DataError naming its line."""
    p = preds[preds["dataset"].isin(datasets)]
    known = pd.MultiIndex.from_frame(loaded[["dataset", "example_id"]])
    bad = ~pd.MultiIndex.from_frame(p[["dataset", "example_id"]]).isin(known)
    if bad.any():
        row = p[bad].iloc[0]
        raise DataError(f"{row.dataset} example_id {row.example_id} is not in the BBQ data "
                        f"({int(bad.sum())} such lines)", path=path, line=int(row.line))
