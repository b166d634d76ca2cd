"""How ``data fetch`` puts files in place, whatever the benchmark: everything is fetched
into a hidden folder beside the destination (:func:`staging`) and moved in only when every
file asked is there (:func:`move_in`: renames on one file system), so a fetch that fails
leaves nothing behind; a download is streamed to a ``.part`` file (:func:`download`) that
is removed when the transfer fails."""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def staging(dest: Path) -> Iterator[Path]:
    """A new hidden folder beside ``dest`` (in its nearest existing ancestor: the same
    file system, so the moves are renames), removed on the way out whatever happens:
    a fetch that fails leaves nothing behind, not even ``dest``'s parents."""
    base = dest.absolute().parent
    while not base.is_dir():
        base = base.parent
    stage = Path(tempfile.mkdtemp(prefix=".fairness-tests-fetch-", dir=base))
    try:
        yield stage
    finally:
        if stage.exists():                      # not moved into place whole
            shutil.rmtree(stage, ignore_errors=True)


def move_in(stage: Path, dest: Path) -> None:
    """Every file fetched into ``stage`` moved into ``dest`` (made whole when it does not
    exist: one rename; else file by file, each a rename; the other files of ``dest`` are
    left as they are)."""
    if not any(p.is_file() for p in stage.rglob("*")):
        return
    if not dest.exists():
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(stage, dest)
        return
    for p in sorted(q for q in stage.rglob("*") if q.is_file()):
        target = dest / p.relative_to(stage)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(p, target)


def download(url: str, part: Path, timeout: float) -> None:
    """``url``'s bytes streamed to ``part`` (its folder made); on any failure the part is
    removed and the error (:class:`urllib.error.URLError` or :class:`OSError`) raised."""
    part.parent.mkdir(parents=True, exist_ok=True)
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp, open(part, "wb") as fh:
            shutil.copyfileobj(resp, fh, 1 << 20)
    except (urllib.error.URLError, OSError):
        part.unlink(missing_ok=True)
        raise


def failure(exc: BaseException) -> str:
    """A failed transfer in words: ``HTTP 404 Not Found``, or the network error's reason."""
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    return str(getattr(exc, "reason", exc))
