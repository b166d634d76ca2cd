"""The user cache: work derived from input files, kept between runs.

Everything here lives under :func:`cache_root` (``$FAIRNESS_CACHE``, default
``~/.cache/fairness_tests``): the embedded model's converted weights
(:mod:`fairness_tests.models.backends.embedded`) and parsed inputs (:func:`cached`),
e.g. the BBQ items after loading and filtering. An entry is named by the sha256 of
everything its value is computed from (the input files' digests, the options, the
package version, the source of the code that computes it:
:func:`code_digest`), so a changed input or a changed parser is a new entry, never a
stale one. ``FAIRNESS_INPUT_CACHE=off`` turns the parsed-input cache off; an unreadable
entry is recomputed, and a cache that cannot be written is skipped silently (the
value is computed as without a cache).
"""
from __future__ import annotations

import hashlib
import os
import pickle
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, TypeVar

from fairness_tests.core.io import canonical_dumps
from fairness_tests.core.version import __version__

ENV_CACHE = "FAIRNESS_CACHE"
ENV_INPUT_CACHE = "FAIRNESS_INPUT_CACHE"
T = TypeVar("T")


def cache_root() -> Path:
    """``$FAIRNESS_CACHE`` or ``~/.cache/fairness_tests``."""
    env = os.environ.get(ENV_CACHE)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "fairness_tests"


def code_digest(*paths: str | Path) -> str:
    """sha256 over the bytes of the given files and of every file under the given
    directories (sorted, ``__pycache__`` left out), each preceded by its name."""
    h = hashlib.sha256()
    for p in map(Path, paths):
        files = sorted(f for f in p.rglob("*") if f.is_file() and "__pycache__" not in f.parts) \
            if p.is_dir() else [p]
        for f in files:
            h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def entry_path(kind: str, key: dict[str, Any]) -> Path:
    """Where the entry of ``kind`` for ``key`` lives: ``<root>/<kind>/<sha256>.pickle``
    of the key, the package version, Python's and pandas' (a pickle is read back by the
    versions that wrote it)."""
    import pandas as pd  # noqa: PLC0415  the cache's values are pandas frames

    full = {"key": key, "fairness_tests": __version__, "pandas": pd.__version__,
            "python": sys.version_info[:2]}
    digest = hashlib.sha256(canonical_dumps(full).encode()).hexdigest()
    return cache_root() / kind / f"{digest}.pickle"


def cached(kind: str, key: dict[str, Any], build: Callable[[], T]) -> T:
    """``build()``, or the value an earlier call with the same ``kind`` and ``key``
    stored (see the module docstring)."""
    if os.environ.get(ENV_INPUT_CACHE) == "off":
        return build()
    path = entry_path(kind, key)
    try:
        with open(path, "rb") as fh:
            return pickle.load(fh)
    except Exception:  # noqa: BLE001  no entry yet, or a truncated or foreign one: built
        pass
    value = build()
    _store(path, value)
    return value


def _store(path: Path, value: Any) -> None:
    """Write the entry atomically (a reader never sees half of it); skip when the cache
    cannot be written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError:
        return
    try:
        with os.fdopen(fd, "wb") as fh:
            pickle.dump(value, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except OSError:
        Path(tmp).unlink(missing_ok=True)
