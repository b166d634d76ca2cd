"""Where things live: packaged data files and user-chosen directories.

Packaged defaults (thresholds, the generative suite, rubrics, the counterfactual
probe, the card schema, the embedded model's recordings and card YAML) are package
data, found through :mod:`importlib.resources`, so they are the same in a checkout,
an editable install and a wheel. A project directory overrides some of them
(:mod:`fairness_tests.core.project`). Nothing here touches the network.

Data directories (BBQ, the published fairness-card material) are chosen by CLI
option, then an environment variable, then ``../shared`` beside the current
directory.
"""
from __future__ import annotations

import importlib.resources
import os
from pathlib import Path

ENV_SHARED_DIR = "FAIRNESS_SHARED_DIR"
ENV_STORE = "FAIRNESS_STORE"


def data_path(*parts: str) -> Path:
    """A packaged data file or directory: ``fairness_tests/data/<parts>``.

    Found with :func:`importlib.resources.files`; pip installs wheels unzipped, so the
    resource is a file on disk and is returned as a :class:`~pathlib.Path`."""
    res = importlib.resources.files("fairness_tests").joinpath("data", *parts)
    if not isinstance(res, os.PathLike):  # a zipped or namespace package: not supported
        raise TypeError(f"packaged data is not a file on disk: {res}")
    return Path(os.fspath(res))


DATA_DIR = data_path()          # rubrics, suites, probes, schemas, thresholds, recordings


def shared_dir() -> Path:
    """``$FAIRNESS_SHARED_DIR`` or ``../shared`` beside the current directory."""
    env = os.environ.get(ENV_SHARED_DIR)
    return Path(env) if env else Path.cwd().parent / "shared"


def benchmark_data_dir(name: str, explicit: str | os.PathLike | None = None) -> Path:
    """A benchmark's data directory: explicit argument, ``$FAIRNESS_<NAME>_DIR`` (the
    name upper-cased), or ``<shared>/benchmarks/<name>`` (where ``data fetch`` puts it)."""
    if explicit:
        return Path(explicit)
    env = os.environ.get(f"FAIRNESS_{name.upper()}_DIR")
    return Path(env) if env else shared_dir() / "benchmarks" / name


def fairness_cards_dir() -> Path:
    """The published generative audit material: ``<shared>/fairness_cards``."""
    return shared_dir() / "fairness_cards"


def default_store_path() -> Path:
    """``$FAIRNESS_STORE`` or ``.fairness/store.sqlite`` in the working directory."""
    env = os.environ.get(ENV_STORE)
    return Path(env) if env else Path.cwd() / ".fairness" / "store.sqlite"


def display_path(path: str | os.PathLike) -> str:
    """A path as it may appear in a card or a committed run, never this machine's
    absolute path: packaged files as ``fairness_tests/data/...``; others relative to
    the current directory (or the folder above it, e.g. ``../shared/bbq``); outside
    those, the bare file name."""
    # normalised, not resolved: ../shared may be a symbolic link to elsewhere
    p = Path(os.path.abspath(path))
    package_parent = data_path().parent.parent
    for base, prefix in ((package_parent, ""), (Path.cwd(), ""), (Path.cwd().parent, "../")):
        try:
            rel = p.relative_to(os.path.abspath(base)).as_posix()
        except ValueError:
            continue
        if base is package_parent and not rel.startswith("fairness_tests/"):
            continue
        return prefix + rel
    return p.name
