"""The one place files are read and written as data: JSONL and sha256.

Every JSONL input (BBQ items, predictions, generative outputs, probe outputs, store
recordings) is read here, so every bad line gets the same error naming the file and
line (:class:`~fairness_tests.core.errors.DataError`): unreadable, not UTF-8,
``invalid JSON (<what>)``, or ``expected one JSON object a line``. A path ending in
``.gz`` is gzip. :func:`write_jsonl` writes one canonical JSON object a line (keys
sorted, no spaces, UTF-8), gzip with a zero mtime for ``.gz``, so the same records give
the same bytes. :func:`sha256_file` / :func:`sha256_text`: the hex digests every
recorded hash is.
"""
from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from fairness_tests.core.errors import DataError


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file's bytes, read in chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


def sha256_text(text: str) -> str:
    """Hex sha256 of ``text`` encoded as UTF-8."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def canonical_dumps(obj: Any) -> str:
    """One JSON line: keys sorted, no spaces, UTF-8 as is; a non-JSON value as its text."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str)


def _read_bytes(path: Path) -> bytes:
    try:
        raw = path.read_bytes()
        return gzip.decompress(raw) if path.suffix == ".gz" else raw
    except (OSError, EOFError) as exc:
        raise DataError(f"cannot read: {getattr(exc, 'strerror', None) or exc}",
                        path=path) from None


def _decode(raw: bytes, path: Path) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DataError(f"not UTF-8 ({exc.reason})", path=path, line=line) from None


def _record(text: str, path: Path, line: int) -> dict:
    """One line's object; a DataError naming the line otherwise."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"invalid JSON ({exc.msg} at column {exc.colno})", path=path,
                        line=line) from None
    if not isinstance(value, dict):
        raise DataError("expected one JSON object a line", path=path, line=line)
    return value


def json_lines(path: str | Path) -> tuple[list[dict], np.ndarray]:
    """Parse a JSONL file (gzip for ``.gz``); returns records and their 1-based line
    numbers. Fast path: one ``json.loads`` of the joined lines; on failure, locate the line."""
    path = Path(path)
    text = _decode(_read_bytes(path), path)
    lines = text.split("\n")
    numbers = np.array([i + 1 for i, s in enumerate(lines) if s.strip()], dtype=np.int64)
    body = [lines[i - 1] for i in numbers]
    try:
        records = json.loads("[" + ",".join(body) + "]")
        if len(records) != len(body):  # a line holding two values "1,2" would slip through
            raise ValueError("line count")
    except ValueError:
        for no, s in zip(numbers, body, strict=True):
            _record(s, path, int(no))
        raise DataError("invalid JSON lines", path=path) from None  # pragma: no cover
    for no, r in zip(numbers, records, strict=True):
        if not isinstance(r, dict):
            raise DataError("expected one JSON object a line", path=path, line=int(no))
    return records, numbers


def read_jsonl(path: str | Path) -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` for each non-blank line, streamed (for files too large
    to hold twice, such as store recordings); the same errors as :func:`json_lines`."""
    path = Path(path)
    opener: Callable[..., Any] = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8") as fh:
            for line, text in enumerate(fh, 1):
                if text.strip():
                    yield line, _record(text, path, line)
    except UnicodeDecodeError as exc:
        raise DataError(f"not UTF-8 ({exc.reason})", path=path) from None
    except (OSError, EOFError) as exc:
        raise DataError(f"cannot read: {getattr(exc, 'strerror', None) or exc}",
                        path=path) from None


def write_jsonl(path: str | os.PathLike[str], records: Iterable[Any],
                dumps: Callable[[Any], str] = canonical_dumps) -> int:
    """Write one ``dumps(record)`` a line to ``path`` (gzip with a zero mtime for
    ``.gz``), beside it first and then renamed into place, so a reader never sees half a
    file; returns how many lines."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    n = 0
    with open(tmp, "wb") as raw:
        gz = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) \
            if path.suffix == ".gz" else None
        out = io.TextIOWrapper(gz if gz is not None else raw, encoding="utf-8", newline="\n")
        for rec in records:
            out.write(dumps(rec) + "\n")
            n += 1
        out.flush()
        out.detach()
        if gz is not None:
            gz.close()
    os.replace(tmp, path)
    return n
