"""``fairness-tests data fetch --benchmark NAME``: a registered benchmark's data files,
installed from the authors' repository at the recorded commit and verified.

What is fetched is the benchmark's :class:`~fairness_tests.core.sources.DataSource`
(``Benchmark.source``, ``"module:NAME"``; :func:`source_of`): ``files`` ``{path in the
repository: sha256}``, each installed in ``dest`` under its local name
(:meth:`~fairness_tests.core.sources.DataSource.local_name`).

- A download comes from :meth:`DataSource.url` (raw GitHub at the commit) or from
  ``base_url + "/" + path`` (a mirror of the repository at that commit); its sha256 must
  be the recorded one, else the fetch is refused: one line naming the file, the sha256
  expected and the one got, and nothing is installed.
- ``from_dir`` (``--from``): a local copy, without network; each file is found there by
  its local name or by its path in the repository, copied whatever it holds (the user's
  copy: a fix, a translation) and labelled :data:`OFFICIAL` or :data:`NOT_OFFICIAL`;
  files missing from the copy are one error naming them all.
- A file already in ``dest`` with the recorded sha256 is kept (``present``); one of the
  release's names with other bytes is replaced by the file fetched (and the log says so);
  the other files of ``dest`` are left as they are.

Everything is fetched into a hidden folder beside ``dest`` and moved in only when every
file is there (:mod:`fairness_tests.core.fetching`): a fetch that fails leaves nothing.
"""
from __future__ import annotations

import shutil
import urllib.error
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fairness_tests.core.errors import ConfigError, DataError, suggest
from fairness_tests.core.fetching import download, failure, move_in, staging
from fairness_tests.core.io import sha256_file
from fairness_tests.core.registry import data_sources, load
from fairness_tests.core.sources import DataSource
from fairness_tests.models.store.scrub import shown_url

Log = Callable[[str], None]
OFFICIAL = "official"
NOT_OFFICIAL = "not the official release"


@dataclass(frozen=True)
class Fetched:
    """One file in ``dest``: its local name, its path in the repository, its sha256,
    how it got there (``present`` | ``downloaded`` | ``copied``) and its release status
    (:data:`OFFICIAL` when the sha256 is the recorded one, else :data:`NOT_OFFICIAL`)."""
    name: str
    repo_path: str
    sha256: str
    how: str
    release: str

    def to_dict(self) -> dict:
        return {"path": self.name, "repo_path": self.repo_path, "sha256": self.sha256,
                "how": self.how, "release": self.release}


def source_of(name: str) -> DataSource:
    """The :class:`DataSource` the registered benchmark ``name`` declares; a
    :class:`ConfigError` naming the benchmarks that have one otherwise."""
    known = data_sources()
    if name not in known:
        raise ConfigError(f"benchmark {name!r} declares no data source; the benchmarks with "
                          f"one: {', '.join(known)}{suggest(name, tuple(known))}")
    found = load(known[name])
    if not isinstance(found, DataSource):
        raise ConfigError(f"{known[name]} (the source of benchmark {name!r}) is not a "
                          "DataSource")
    return found


def release_of(source: DataSource, path: str, sha256: str) -> str:
    return OFFICIAL if source.files[path] == sha256 else NOT_OFFICIAL


def release_line(source: DataSource, f: Fetched) -> str:
    """``<file>: official (sha256 ...)`` or ``<file>: not the official release (sha256 ...,
    the release's ... at repo@commit)``."""
    if f.release == OFFICIAL:
        return f"{f.name}: {OFFICIAL} (sha256 {f.sha256})"
    return (f"{f.name}: {NOT_OFFICIAL} (sha256 {f.sha256}, the release's "
            f"{source.files[f.repo_path]} at {source.repo}@{source.commit[:8]})")


def fetch_source(source: DataSource, dest: str | Path, base_url: str | None = None,
                 from_dir: str | Path | None = None, timeout: float = 60.0,
                 log: Log | None = None) -> dict[str, Fetched]:
    """Install every file of ``source`` into ``dest`` (module docstring); returns
    ``{local name: Fetched}`` in the source's order."""
    say = log or (lambda _: None)
    dest = Path(dest)
    local = Path(from_dir) if from_dir is not None else None
    if local is not None:
        _check_copy(source, local)
    out: dict[str, Fetched] = {}
    with staging(dest) as stage:
        for path, digest in source.files.items():
            name = source.local_name(path)
            target = dest / name
            held = sha256_file(target) if target.is_file() else None
            if held == digest:
                out[name] = Fetched(name, path, digest, "present", OFFICIAL)
                say(f"{name}: present, verified")
                continue
            if held is not None:
                say(f"{name}: in {dest} but not the official release (sha256 {held}): "
                    "replaced by the file fetched")
            out[name] = (_copy(source, path, local, stage, say) if local is not None
                         else _download(source, path, base_url, stage, timeout, say))
        move_in(stage, dest)
    return out


def _in_copy(source: DataSource, path: str, local: Path) -> Path | None:
    """The file of ``path`` in the copy: by its local name, else by its repository path."""
    return next((p for p in (local / source.local_name(path), local / path) if p.is_file()),
                None)


def _check_copy(source: DataSource, local: Path) -> None:
    """A :class:`DataError` naming every file the copy lacks."""
    if not local.is_dir():
        raise DataError("--from: no such directory", path=local)
    missing = [source.local_name(p) for p in source.files if _in_copy(source, p, local) is None]
    if missing:
        raise DataError(f"--from: no {', '.join(missing)} (each looked for by its name and by "
                        f"its path in {source.repo}); nothing was installed", path=local)


def _copy(source: DataSource, path: str, local: Path, stage: Path, say: Log) -> Fetched:
    """The copy's file staged as it is, labelled official or not."""
    src = _in_copy(source, path, local)
    assert src is not None                     # _check_copy found every file
    name = source.local_name(path)
    (stage / name).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, stage / name)
    sha = sha256_file(stage / name)
    say(f"{name}: copied from {src}")
    return Fetched(name, path, sha, "copied", release_of(source, path, sha))


def _download(source: DataSource, path: str, base_url: str | None, stage: Path,
              timeout: float, say: Log) -> Fetched:
    """The file downloaded to a ``.part`` and kept only with the recorded sha256."""
    url = f"{base_url.rstrip('/')}/{path}" if base_url else source.url(path)
    name = source.local_name(path)
    part = stage / f"{name}.part"
    try:
        download(url, part, timeout)
    except (urllib.error.URLError, OSError) as exc:
        raise DataError(f"download failed from {shown_url(url)}: {failure(exc)}; nothing was "
                        "installed. Without network, install from a local copy of the "
                        "files with --from DIR",
                        path=name) from None
    got, want = sha256_file(part), source.files[path]
    if got != want:
        part.unlink()
        raise DataError(f"refused: sha256 {got}, expected {want} ({source.repo}@"
                        f"{source.commit[:8]} {path}, from {shown_url(url)}): not the "
                        "release; nothing was installed", path=name)
    part.replace(stage / name)
    say(f"{name}: downloaded from {shown_url(url)}, verified")
    return Fetched(name, path, got, "downloaded", OFFICIAL)
