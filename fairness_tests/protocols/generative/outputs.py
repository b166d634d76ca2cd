"""Generation records as JSONL (the published raw-output fields), read and written.

Each line is a JSON object with at least ``prompt_family, paraphrase_id, occupation,
slice_gender, slice_religion, temperature, top_p, seed, output_text, status``;
``status`` is ``"ok"`` or ``"error"`` (``"refused"``, a backend-level refusal, is also
accepted). Other keys are kept. Errors name the file and line.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from fairness_tests.core.errors import DataError
from fairness_tests.core.io import json_lines
from fairness_tests.protocols.generative.grid import RAW_OUTPUT_FIELDS

STATUSES = ("ok", "error", "refused")


def read_outputs(path: str | Path) -> pd.DataFrame:
    """Read a JSONL outputs file into a records table (one row per non-blank line)."""
    p = Path(path)
    records, numbers = json_lines(p)
    rows = []
    for obj, i in zip(records, numbers.tolist(), strict=True):
        validate_record(obj, p, i)
        obj["_line"] = i
        rows.append(obj)
    if not rows:
        raise DataError("no records", path=p)
    df = pd.DataFrame(rows)
    df["output_text"] = df["output_text"].fillna("").astype(str)
    df["temperature"] = df["temperature"].astype(float)
    df["top_p"] = df["top_p"].astype(float)
    df["seed"] = df["seed"].astype(int)
    return df


def validate_record(obj: dict, path: object = None, line: int | None = None) -> None:
    missing = [f for f in RAW_OUTPUT_FIELDS if f not in obj]
    if missing:
        raise DataError(f"missing field(s) {', '.join(missing)}", path=path, line=line)
    if obj["status"] not in STATUSES:
        raise DataError(f"status must be one of {STATUSES}, got {obj['status']!r}",
                        path=path, line=line, key="status")
    text = obj["output_text"]
    if text is not None and not isinstance(text, str):
        raise DataError("output_text must be a string", path=path, line=line, key="output_text")
    if obj["status"] == "ok" and text is None:
        raise DataError("output_text is null on an ok record", path=path, line=line,
                        key="output_text")
    for k in ("temperature", "top_p"):
        if not isinstance(obj[k], (int, float)) or isinstance(obj[k], bool):
            raise DataError(f"{k} must be a number", path=path, line=line, key=k)
    if not isinstance(obj["seed"], int) or isinstance(obj["seed"], bool):
        raise DataError("seed must be an integer", path=path, line=line, key="seed")
    for k in ("prompt_family", "paraphrase_id", "occupation", "slice_gender", "slice_religion"):
        if not isinstance(obj[k], str) or not obj[k]:
            raise DataError(f"{k} must be a non-empty string", path=path, line=line, key=k)


def write_outputs(records: pd.DataFrame, path: str | Path) -> Path:
    """Write a records table as JSONL (published raw-output fields first)."""
    p = Path(path)
    cols = [c for c in RAW_OUTPUT_FIELDS if c in records] + [
        c for c in records.columns if c not in RAW_OUTPUT_FIELDS and not c.startswith("_")]
    with p.open("w", encoding="utf-8") as fh:
        for row in records[cols].to_dict(orient="records"):
            row = {k: (v.item() if hasattr(v, "item") else v) for k, v in row.items()}
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return p
