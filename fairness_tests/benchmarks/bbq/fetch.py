"""``fairness-tests data fetch``: install the official BBQ files, verified.

From nyu-mll/BBQ at commit :data:`~fairness_tests.benchmarks.bbq.official.COMMIT`
(``raw.githubusercontent.com``, or a mirror given as ``base_url``), or with ``source``
from a local copy (a clone of the BBQ repository, a folder this command filled, or a
flat folder: ``<Category>.jsonl`` beside ``additional_metadata.csv``), without any
network. ``dest`` gets the BBQ repository's layout, which the loader reads::

    dest/data/<Category>.jsonl
    dest/supplemental/additional_metadata.csv

A download is verified before it is put in place: its git blob id must equal the
release's (known for all twelve files) and its sha256 too where that is known
(:func:`fairness_tests.benchmarks.bbq.official.verify`); it is streamed to
``<name>.part`` and renamed only when it verifies (a download that does not is corrupt or
not the release: refused). A local copy (``source``) is the user's own: it is copied
whatever it holds, each file labelled "the official release" or "not the official
release" (a regenerated stand-in, a translation, a fix) in the log and in the command's
output, and every run that reads it says so again (``--require-official`` refuses it
there). Everything is fetched into a hidden folder beside
``dest`` and moved into place only when every file asked is there: a wrong file (a
:class:`DataError` naming it) or a failed download (naming the URL, without any
token in it, and ``--from``) leaves nothing behind. A file already in ``dest``
that verifies is kept. The metadata file is optional: when the source has none (HTTP
404, a network error, or no file in the local copy) the loader derives ``target_loc``
by the BBQ authors' rule, and the log says so.
"""
from __future__ import annotations

import os
import shutil
import urllib.error
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from fairness_tests.benchmarks.bbq.data import METADATA_PLACES
from fairness_tests.benchmarks.bbq.official import (
    BASE_URL,
    METADATA_FILE,
    OFFICIAL,
    digests,
    file_name,
    resolve_categories,
    verify,
)
from fairness_tests.core.errors import DataError
from fairness_tests.core.fetching import download, failure, move_in, staging
from fairness_tests.models.store.scrub import shown_url

Log = Callable[[str], None]


@dataclass
class Installed:
    """One file in ``dest``: its path there, digests, and how it got there
    (``present`` | ``downloaded`` | ``copied``)."""
    path: str
    sha256: str
    blob: str
    how: str

    def to_dict(self) -> dict:
        return {"path": self.path, "sha256": self.sha256, "git_blob": self.blob,
                "how": self.how}


def _quiet(_: str) -> None:
    pass


def fetch(dest: str | Path, categories: tuple[str, ...] | None = None,
          base_url: str = BASE_URL, source: str | Path | None = None,
          timeout: float = 60.0, log: Log | None = None) -> dict[str, Installed]:
    """Install the categories' files (``None``: the intersectional two; ``("all",)``:
    the eleven) and the metadata file into ``dest``; returns {file name: Installed}."""
    log = log or _quiet
    dest = Path(dest)
    if source is not None and not Path(source).is_dir():
        raise DataError("--from: no such directory", path=source)
    names = [file_name(c) for c in resolve_categories(categories)] + [METADATA_FILE]
    out: dict[str, Installed] = {}
    with staging(dest) as stage:
        for name in names:
            ref = OFFICIAL[name]
            target = dest / ref.path
            if target.is_file() and verify(name, *digests(target)) is None:
                sha, blob = digests(target)
                out[name] = Installed(ref.path, sha, blob, "present")
                log(f"{ref.path}: present, verified")
                continue
            got = _copy(name, Path(source), stage / ref.path, log) if source is not None \
                else _download(name, base_url, stage / ref.path, timeout, log)
            if got is not None:
                out[name] = got
        move_in(stage, dest)
    return out


def _put(part: Path, target: Path) -> tuple[str, str]:
    """Verify ``part`` as the official ``target.name`` and move it into place."""
    sha, blob = digests(part)
    why = verify(target.name, sha, blob)
    if why:
        part.unlink(missing_ok=True)
        raise DataError(f"refused: {why}")
    os.replace(part, target)
    return sha, blob


def _local(source: Path, name: str) -> Path | None:
    places = ([f"data/{name}", name] if name != METADATA_FILE else list(METADATA_PLACES))
    return next((source / p for p in places if (source / p).is_file()), None)


def _copy(name: str, source: Path, target: Path, log: Log) -> Installed | None:
    ref = OFFICIAL[name]
    src = _local(source, name)
    if src is None:
        if name == METADATA_FILE:
            log(f"{ref.path}: not in {source} (not installed; target_loc will be derived by "
                "the BBQ authors' rule)")
            return None
        raise DataError(f"--from: no {name} (looked for data/{name} and {name}); the copy "
                        "must hold every category asked (--categories)", path=source)
    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_name(target.name + ".part")
    shutil.copyfile(src, part)
    sha, blob = digests(part)
    os.replace(part, target)
    log(f"{ref.path}: copied from {src}")       # official release or not: said per file after
    return Installed(ref.path, sha, blob, "copied")


def _download(name: str, base_url: str, target: Path, timeout: float,
              log: Log) -> Installed | None:
    ref = OFFICIAL[name]
    url = f"{base_url.rstrip('/')}/{ref.path}"
    part = target.with_name(target.name + ".part")
    try:
        download(url, part, timeout)
    except (urllib.error.URLError, OSError) as exc:
        why = failure(exc)
        if name == METADATA_FILE:
            log(f"{ref.path}: not installed ({why} from {shown_url(url)}); target_loc will be "
                "derived by the BBQ authors' rule")
            return None
        raise DataError(f"download failed from {shown_url(url)}: {why}; nothing was "
                        "installed. Without network, install from a local copy of the BBQ "
                        "release: fairness-tests data fetch --from DIR", path=name) from None
    try:
        sha, blob = _put(part, target)
    except DataError as exc:
        raise DataError(f"{exc} (file not saved)", path=shown_url(url)) from None
    log(f"{ref.path}: downloaded from {shown_url(url)}, verified")
    return Installed(ref.path, sha, blob, "downloaded")
