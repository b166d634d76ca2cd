"""The one JSONL reader: every JSONL input (BBQ items, predictions, generative
outputs, probe outputs) goes through :func:`json_lines`, so every bad line gets the
same clear error naming the file and line."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np

from fairness_tests.core.errors import DataError


def json_lines(path: str | Path) -> tuple[list[dict], np.ndarray]:
    """Parse a JSONL file (``.gz``: gzip-compressed); returns records and their 1-based
    line numbers. Fast path: one ``json.loads`` of the joined lines; on failure, locate
    the line."""
    path = Path(path)
    try:
        raw = path.read_bytes()
        if path.suffix == ".gz":
            raw = gzip.decompress(raw)
    except (OSError, EOFError) as exc:
        raise DataError(f"cannot read: {getattr(exc, 'strerror', None) or exc}", path=path) \
            from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DataError(f"not UTF-8 ({exc.reason})", path=path, line=line) from None
    lines = text.split("\n")
    numbers = np.array([i + 1 for i, s in enumerate(lines) if s.strip()], dtype=np.int64)
    body = [lines[i - 1] for i in numbers]
    try:
        records = json.loads("[" + ",".join(body) + "]")
        if len(records) != len(body):  # a line holding two values "1,2" would slip through
            raise ValueError("line count")
    except ValueError:
        for no, s in zip(numbers, body):
            try:
                value = json.loads(s)
            except ValueError as exc:
                raise DataError(f"invalid JSON ({exc})", path=path, line=int(no)) from None
            if not isinstance(value, dict):
                raise DataError("expected one JSON object a line", path=path, line=int(no))
        raise DataError("invalid JSON lines", path=path)  # pragma: no cover
    for no, r in zip(numbers, records):
        if not isinstance(r, dict):
            raise DataError("expected one JSON object a line", path=path, line=int(no))
    return records, numbers
