"""Read BBQ predictions as people have them, and turn every answer into an option index.

One JSON object a line, in one of two formats (one format per file):

``answers``: ``{"category": "Age", "example_id": 17, "answer": <answer>}`` with
optional ``repeat`` (default 0), ``rotation`` (0-2: the cyclic option order shown,
default 0) and ``letter_probs`` (``[p0, p1, p2]``, the answer distribution in the
ORIGINAL option order). ``--answer-field NAME`` reads the answer from ``NAME``
instead of ``answer`` (the BBQ authors' results files: ``unifiedqa-t5-11b_pred_race``).
An answer is one of (one kind per file):

- an option index 0, 1, 2 (dataset order);
- a letter ``a``/``B``/``(c)``: the option shown at that position (under ``rotation``);
- the answer text, mapped to an option by the BBQ authors' rule
  (:func:`fairness_tests.benchmarks.bbq.authors.text_candidates`);
- ``null``: no answer (invalid).

A line may carry the whole BBQ item (``answer_info``, ``ans0``..``ans2``, ...), as the
authors' results files do, or only ``category`` and ``example_id``.

``lm-eval``: lm-evaluation-harness ``--log_samples`` output of its BBQ
multiple-choice task (:mod:`fairness_tests.benchmarks.bbq.lmeval`).

:func:`read_predictions` reads and checks the lines (every fault a DataError naming
the file and the line); :func:`resolve` maps the answers to option indices against
the loaded BBQ items and reports what did not map.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from fairness_tests.benchmarks.bbq import lmeval
from fairness_tests.benchmarks.bbq.official import CATEGORIES
from fairness_tests.core.errors import DataError, suggest
from fairness_tests.core.io import json_lines

COLUMNS = ["dataset", "example_id", "repeat", "rotation", "answer", "letter_probs", "line"]
ANSWER = "answer"
INDEX, LETTER, TEXT, CHOICE = "index", "letter", "text", "choice"
KIND_WORDS = {INDEX: "an option index", LETTER: "a letter", TEXT: "an answer text",
              CHOICE: "an lm-eval choice"}
_LETTER = re.compile(r"\(?([abc])\)?\.?", re.IGNORECASE)
#: the fields of a BBQ item a line may carry; the first four name the item itself
ITEM_FIELDS = ("question_index", "question_polarity", "context_condition", "label",
               "context", "question", "ans0", "ans1", "ans2", "answer_info")
_IDENTITY = ITEM_FIELDS[:4]
_NOT_ANSWERS = {"category", "dataset", "example_id", "repeat", "rotation", "letter_probs",
                "additional_metadata", *ITEM_FIELDS}
MAX_LISTED = 50
_INTS = ("example_id", "repeat", "rotation", "line")
MAX_ID = 2 ** 63 - 1


@dataclass
class Predictions:
    """The lines of a predictions file: ``table`` has ``dataset, example_id, repeat,
    rotation, value`` (the answer as given), ``kind`` (:data:`KIND_WORDS` or None for
    null), ``option`` (lm-eval: the option index), ``letter_probs``, ``line`` and
    ``item`` (the BBQ item the line carries, or None)."""
    path: Path
    table: pd.DataFrame
    format: str                 # "answers" | "lm-eval"
    field: str                  # where the answer was read
    kind: str | None            # the file's answer kind; None when every answer is null

    def categories(self) -> tuple[str, ...]:
        """The categories the lines name, in CATEGORIES order; an unknown name is an
        error naming its line and the closest category."""
        named = self.table["dataset"]
        bad = ~named.isin(CATEGORIES)
        if bad.any():
            row = self.table[bad].iloc[0]
            raise DataError(f"unknown category {row['dataset']!r}"
                            f"{suggest(row['dataset'], CATEGORIES)}; BBQ has "
                            f"{', '.join(CATEGORIES)} ({int(bad.sum())} such lines)",
                            path=self.path, line=int(row["line"]), key="category")
        return tuple(c for c in CATEGORIES if c in set(named))


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
    hi = MAX_ID if hi is None else hi
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        rng = f"{lo}..{hi}" if hi != MAX_ID else f">= {lo} (below 2^63)"
        raise DataError(f"{key} must be an integer {rng}, got {value!r}", path=path, line=line,
                        key=key)
    return value


def answer_kind(value, path, line, field) -> str | None:
    """The kind of one answer (None for null); anything else is an error."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        _int(value, path, line, field, 0, 2)
        return INDEX
    if isinstance(value, str):
        return LETTER if _LETTER.fullmatch(value.strip()) else TEXT
    raise DataError(f"{field} must be an option index 0-2, a letter a-c, the answer text or "
                    f"null, got {value!r}", path=path, line=line, key=field)


def _missing_answer(r: dict, field: str, given: bool, path, line) -> DataError:
    if given:
        return DataError(f"missing {field!r} (the --answer-field)", path=path, line=line,
                         key=field)
    others = sorted(k for k, v in r.items() if k not in _NOT_ANSWERS and not isinstance(v, dict))
    hint = (f"; this line's other fields: {', '.join(others)}: pass --answer-field NAME"
            if others else "")
    return DataError(f"missing \"answer\" (use null for an invalid answer){hint}", path=path,
                     line=line, key=field)


def read_predictions(path: str | Path, answer_field: str | None = None) -> Predictions:
    """Read and check a predictions file (module docstring)."""
    path = Path(path)
    if not path.is_file():
        raise DataError("predictions file not found", path=path)
    records, numbers = json_lines(path)
    if not records:
        raise DataError("no predictions: the file holds no JSON line", path=path)
    is_lm = [lmeval.is_sample(r) for r in records]
    fmt = "lm-eval" if is_lm[0] else "answers"
    odd = next((i for i, x in enumerate(is_lm) if x != is_lm[0]), None)
    if odd is not None:
        what = {True: "an lm-eval sample", False: "a predictions line"}
        raise DataError(f"{what[is_lm[odd]]}, but line {int(numbers[0])} is {what[is_lm[0]]}: "
                        "one format per file", path=path, line=int(numbers[odd]))
    field = answer_field or (lmeval.FIELD if fmt == "lm-eval" else ANSWER)
    rows = [(_lm_row if fmt == "lm-eval" else _row)(r, int(no), path, field, bool(answer_field))
            for r, no in zip(records, numbers, strict=True)]
    names = ["dataset", "example_id", "repeat", "rotation", "value", "kind", "option",
             "letter_probs", "line", "item"]
    cols = list(zip(*rows, strict=True))
    df = pd.DataFrame({n: np.array(c, dtype=np.int64) if n in _INTS else
                       pd.Series(c, dtype=object) for n, c in zip(names, cols, strict=True)})
    kinds = df["kind"][df["kind"].map(lambda k: k is not None)]
    if kinds.nunique() > 1:
        first = kinds.iloc[0]
        row = df[df["kind"].notna() & (df["kind"] != first)].iloc[0]
        raise DataError(f"{field} is {KIND_WORDS[row['kind']]} ({row['value']!r}), but line "
                        f"{int(df.loc[kinds.index[0], 'line'])} gives {KIND_WORDS[first]} "
                        f"({df.loc[kinds.index[0], 'value']!r}): one answer format per file",
                        path=path, line=int(row["line"]), key=field)
    _check_duplicates(df, path)
    return Predictions(path=path, table=df, format=fmt, field=field,
                       kind=kinds.iloc[0] if len(kinds) else None)


def _category(r: dict, path, line) -> str:
    cat = r.get("category", r.get("dataset"))
    if not isinstance(cat, str) or not cat:
        raise DataError("missing \"category\"", path=path, line=line, key="category")
    return cat


def _row(r: dict, line: int, path, field: str, given: bool) -> tuple:
    cat = _category(r, path, line)
    if "example_id" not in r:
        raise DataError("missing \"example_id\"", path=path, line=line, key="example_id")
    if field not in r:
        raise _missing_answer(r, field, given, path, line)
    value = r[field]
    kind = answer_kind(value, path, line, field)
    item = {k: r[k] for k in ITEM_FIELDS if k in r} if "answer_info" in r else None
    return (cat, _int(r["example_id"], path, line, "example_id"),
            _int(r.get("repeat", 0), path, line, "repeat"),
            _int(r.get("rotation", 0), path, line, "rotation", 0, 2), value, kind, None,
            _probs(r.get("letter_probs"), path, line), line, item)


def _lm_row(r: dict, line: int, path, field: str, given: bool) -> tuple:
    doc = r["doc"]
    cat = _category(doc, path, line)
    if "example_id" not in doc:
        raise DataError("the sample's doc has no \"example_id\"", path=path, line=line,
                        key="doc.example_id")
    option, text = lmeval.sample_answer(r, field, path, line)
    return (cat, _int(doc["example_id"], path, line, "doc.example_id"), 0, 0, text, CHOICE,
            option, None, line, {k: doc[k] for k in ITEM_FIELDS if k in doc})


def _check_duplicates(df: pd.DataFrame, path) -> None:
    key = ["dataset", "example_id", "repeat", "rotation"]
    dup = df.duplicated(key)
    if dup.any():
        row = df[dup].iloc[0]
        first = df[(df[key] == row[key]).all(axis=1)]
        raise DataError(f"duplicate answer for {row['dataset']} example_id "
                        f"{int(row['example_id'])} repeat {int(row['repeat'])} rotation "
                        f"{int(row['rotation'])} (first on line {int(first['line'].iloc[0])})",
                        path=path, line=int(row["line"]))
