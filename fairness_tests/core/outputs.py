"""A command's paths, checked before any work (:func:`check_paths`): no output may be,
hold or sit inside another path of the same command (real paths compared, symbolic links
resolved), and an output must be a place this user can write, of its kind (a folder where
a folder is written, a file where a file is). Every failure is a
:class:`~fairness_tests.core.errors.ConfigError` (exit 2) in one line naming the options.

The roles come from the option spec (:data:`fairness_tests.core.options.PathRole`); this
module imports nothing heavy, so the spec stays light.
"""
from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from fairness_tests.core.errors import ConfigError


class PathArg(NamedTuple):
    """One path a command was given: how its option is spelt (``--out``,
    ``BASELINE_RUN``), its role (:data:`fairness_tests.core.options.PathRole`) and the
    path as given."""
    option: str
    role: str
    path: str


_OUTPUTS = ("output_dir", "output_file", "inout")
_INPUTS = ("input", "inout")


def describe(path: str | Path) -> str:
    """What is at ``path``, in words: a folder, a file, a symbolic link to a folder (or
    file, or to nothing), or nothing."""
    p = Path(path)
    if p.is_symlink():
        what = "a folder" if p.is_dir() else "a file" if p.exists() else "nothing"
        return f"a symbolic link to {what} ({os.readlink(p)})"
    return "a folder" if p.is_dir() else "a file" if p.exists() else "nothing"


def _real(path: str) -> str:
    return os.path.realpath(os.path.abspath(path))


def _relation(out: str, other: str) -> str | None:
    """How output ``out`` meets path ``other`` (real paths): ``is``, ``is inside``,
    ``holds``, or None when they are apart."""
    a, b = _real(out), _real(other)
    if a == b:
        return "is"
    if a.startswith(b.rstrip(os.sep) + os.sep):
        return "is inside"
    if b.startswith(a.rstrip(os.sep) + os.sep):
        return "holds"
    return None


def check_paths(args: Iterable[PathArg]) -> None:
    """Refuse (:class:`ConfigError`, exit 2, one line naming both options) a command whose
    output (role ``output_dir``, ``output_file`` or ``inout``) is, holds or sits inside
    another of its paths: an input that exists, or another output (each pair named
    once). Then each output of role ``output_dir`` or ``output_file`` must be a place
    this user can write (:func:`check_writable`)."""
    given = list(args)
    for i, out in enumerate(given):
        if out.role not in _OUTPUTS:
            continue
        for j, other in enumerate(given):
            if j == i or (other.role in _OUTPUTS and j < i) or \
                    (other.role == "input" and not os.path.lexists(other.path)):
                continue
            relation = _relation(out.path, other.path)
            if relation is not None:
                _overlap(out, relation, other)
    for out in given:
        if out.role in ("output_dir", "output_file"):
            check_writable(out.path, option=out.option, folder=out.role == "output_dir")


def _overlap(out: PathArg, relation: str, other: PathArg) -> None:
    what = "an input" if other.role in _INPUTS else "another output"
    kind = "folder" if out.role == "output_dir" else "file"
    raise ConfigError(f"{out.option} {out.path}: {relation} {other.option} {other.path}, "
                      f"{what} of this command: choose another {kind} (nothing was "
                      "written)")


def nearest_existing(path: Path) -> Path:
    """``path`` itself when something is there (a dangling link counts), else its
    nearest ancestor that exists."""
    p = Path(path)
    while not os.path.lexists(p) and p != p.parent:
        p = p.parent
    return p


def check_writable(path: str | Path, *, option: str, folder: bool = True) -> None:
    """Refuse (:class:`ConfigError`, exit 2, one line naming the option and the place) an
    output the command could not write: ``path`` is of the other kind (a file or a
    dangling link where a ``folder`` goes, a folder where a file goes); its nearest
    existing ancestor is no folder; or the folder that would receive it (``path``
    itself for an existing folder, else that ancestor) is not writable by this user."""
    p = Path(path)
    if os.path.lexists(p):
        if (not p.is_dir()) if folder else (p.is_dir() or not p.exists()):
            kind = "folder" if folder else "file"
            raise ConfigError(f"{option} {path}: is {describe(p)}, not a {kind}: choose "
                              f"another {kind} (nothing was written)")
        writable_place(p if folder else p.parent, path, option=option)
    else:
        writable_place(nearest_existing(p.parent), path, option=option)


def writable_place(place: Path, path: str | Path, *, option: str) -> None:
    """Refuse (:class:`ConfigError`) ``option path`` when ``place``, where it is made, is
    no folder or not writable by this user (mode bits, an immutable flag, a read-only
    file system: what ``access(2)`` says)."""
    if not place.is_dir():
        raise ConfigError(f"{option} {path}: {place} is {describe(place)}, which cannot "
                          "hold it: choose another place (nothing was written)")
    if not os.access(place, os.W_OK | os.X_OK):
        raise ConfigError(f"{option} {path}: this user cannot write in {place} (permission "
                          "denied, an immutable folder or a read-only file system): choose "
                          "a folder you can write (nothing was written)")
