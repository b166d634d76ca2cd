"""The one place files are read and written as data: JSONL and sha256.

Every JSONL input (BBQ items, predictions, generative outputs, probe outputs, store
recordings) is read here, so every bad line gets the same error naming the file and
line (:class:`~fairness_tests.core.errors.DataError`): unreadable, not UTF-8,
``invalid JSON (<what>)``, or ``expected one JSON object a line``. A path ending in
``.gz`` is gzip. :func:`write_jsonl` writes one canonical JSON object a line (keys
sorted, no spaces, UTF-8), gzip with a zero mtime for ``.gz``, so the same records give
the same bytes. :func:`sha256_file` / :func:`sha256_text`: the hex digests every
recorded hash is.

Writing, atomically: :func:`atomic_write_text` (a file: written beside it, then renamed
into place) and :func:`output_dir` (a directory: written into a temporary sibling and
swapped in whole, so an interruption leaves the old output or the new, never a mix).
Every directory the tool writes holds :data:`OUTPUT_MARKER`; an existing directory is
replaced only when it holds the marker and nothing the tool did not write
(:func:`check_output`), so ``--out`` never deletes a user's files.

Every command's paths are checked before any work by
:func:`fairness_tests.core.outputs.check_paths` (outputs apart from inputs, writable).
"""
from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from fairness_tests.core.errors import ConfigError, DataError
from fairness_tests.core.outputs import describe, nearest_existing, writable_place
from fairness_tests.core.text import decode_input, refuse_foreign_bom


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
    text = decode_input(_read_bytes(path), path)
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
        with opener(path, "rb") as fh:
            refuse_foreign_bom(fh.read(4), path)
        with opener(path, "rt", encoding="utf-8-sig") as fh:
            for line, text in enumerate(fh, 1):
                if text.strip():
                    yield line, _record(text, path, line)
    except UnicodeDecodeError as exc:
        raise DataError(f"not UTF-8 ({exc.reason}); input files must be UTF-8",
                        path=path) from None
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


# ----------------------------------------------------------------------------- atomic writes

#: the file that marks a directory as this tool's output; it lists the entries written
OUTPUT_MARKER = ".fairness-tests-output"


def atomic_write_text(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8, ``\\n`` line ends) to ``path``: into a temporary file beside
    it, then renamed into place, so a reader never sees half a file. Mode 0666 less the
    umask (a file for reading, not mkstemp's 0600)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def _written_entries(directory: Path) -> set[str] | None:
    """The entries the marker of ``directory`` lists (None: no marker, not ours)."""
    marker = directory / OUTPUT_MARKER
    if not marker.is_file():
        return None
    try:
        listed = json.loads(marker.read_text(encoding="utf-8")).get("entries", [])
    except (OSError, ValueError, AttributeError):
        listed = []
    return {str(e) for e in listed} | {OUTPUT_MARKER}


def foreign_entries(path: str | Path) -> list[str]:
    """What in the directory ``path`` this tool did not write: every entry when it has
    no marker, else the entries its marker does not list (sorted)."""
    d = Path(path)
    names = sorted(p.name for p in d.iterdir())
    ours = _written_entries(d)
    return names if ours is None else [n for n in names if n not in ours]


def check_output(path: str | Path, *, force: bool = False, option: str = "--out") -> None:
    """Refuse (:class:`ConfigError`, exit 2) an output path whose replacement would lose
    a user's data: an existing file, or a directory holding anything this tool did not
    write. With ``force`` a directory of the tool's (it has the marker) may also hold
    other files: only the tool's entries are replaced, the others are kept. A directory
    without the marker is refused even with ``force`` unless it is empty."""
    p = Path(path)
    if p.is_symlink():
        raise ConfigError(f"is {describe(p)}: refused (a link is never replaced; the link "
                          "and what it points to are untouched): choose a new directory "
                          "(nothing was written)", path=p, key=option)
    if p.exists() and not p.is_dir():
        raise ConfigError("exists and is not a directory: choose a new directory "
                          "(nothing was written)", path=p, key=option)
    if not p.exists():
        writable_place(nearest_existing(p.parent), p, option=option)
        return
    for place in (p.parent, p):              # made beside it, then swapped in for it
        writable_place(place, p, option=option)
    foreign = foreign_entries(p)
    if not foreign:
        return
    shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3
                                      else "")
    if _written_entries(p) is None:
        raise ConfigError(f"holds files this tool did not write ({shown}) and no "
                          f"{OUTPUT_MARKER}: choose a new or empty directory (nothing "
                          "was written or deleted)", path=p, key=option)
    if not force:
        raise ConfigError(f"holds files this tool did not write ({shown}): choose a new "
                          "directory, or --force to replace only the tool's own files "
                          "there (nothing was written or deleted)", path=p, key=option)


def _mark(directory: Path) -> None:
    """Write the marker of ``directory``, listing its entries (all written by the tool)."""
    entries = sorted(p.name for p in directory.iterdir() if p.name != OUTPUT_MARKER)
    (directory / OUTPUT_MARKER).write_text(
        json.dumps({"tool": "fairness-tests", "entries": entries}, indent=1) + "\n",
        encoding="utf-8")


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists() or path.is_symlink():
        path.unlink()


def _merge_into(tmp: Path, target: Path) -> None:
    """``--force`` into a tool directory holding other files: each of the new entries
    replaces the tool's entry of that name (renamed into place), the tool's entries the
    new output lacks are removed, the other files are kept; then the marker lists the
    tool's entries."""
    old_ours = (_written_entries(target) or set()) - {OUTPUT_MARKER}
    new = sorted(p.name for p in tmp.iterdir() if p.name != OUTPUT_MARKER)
    for name in new:
        dest = target / name
        trash = target / f".{name}.old-{os.getpid()}"
        if dest.exists() or dest.is_symlink():
            os.replace(dest, trash)
        os.replace(tmp / name, dest)
        _remove(trash)
    for name in sorted(old_ours - set(new)):
        _remove(target / name)
    (target / OUTPUT_MARKER).write_text(
        json.dumps({"tool": "fairness-tests", "entries": new}, indent=1) + "\n",
        encoding="utf-8")
    shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def _sigint_deferred() -> Iterator[None]:
    """Hold a Ctrl-C (SIGINT) that arrives inside the block until it ends (main thread
    only; elsewhere the block runs as is)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


@contextmanager
def output_dir(path: str | Path, *, force: bool = False,
               option: str = "--out") -> Iterator[Path]:
    """Write a whole output directory atomically: yields a new temporary sibling of
    ``path`` to fill; when the block ends without an error, the marker is written and
    the sibling replaces ``path`` in one rename (the old directory, if any, is renamed
    aside first and removed after); on an error or an interruption the sibling is
    removed and ``path`` is as it was. Checked with :func:`check_output` before and
    again at the swap."""
    target = Path(path)
    check_output(target, force=force, option=option)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    except OSError as exc:                   # the place changed since it was checked
        raise ConfigError(f"cannot write in {target.parent} "
                          f"({exc.strerror or exc}): choose a folder you can write "
                          "(nothing was written)", path=target, key=option) from None
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)           # mkdtemp makes 0700; an output is for reading
    try:
        yield tmp
        _mark(tmp)
        check_output(target, force=force, option=option)
        if target.exists() and foreign_entries(target):
            _merge_into(tmp, target)         # --force: the user's files stay where they are
            return
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        _remove(old)
        with _sigint_deferred():          # the two renames: never one without the other
            if target.exists():
                os.replace(target, old)
            os.replace(tmp, target)
        _remove(old)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
