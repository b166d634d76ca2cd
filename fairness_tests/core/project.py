"""A user's project directory, and what it overrides of the packaged defaults.

The defaults ship inside the package (:func:`fairness_tests.core.paths.data_path`):
``thresholds/`` (``default.yaml`` + ``models/*.yaml``), ``recordings/manifest.yaml``
and the files it lists, ``cards/<model>.yaml``. A project directory holds the same
things for its own models, in the layout ``fairness-tests init`` writes::

    <project>/
      pyproject.toml               [tool.fairness_tests] (optional; keys below)
      thresholds/default.yaml      replaces the packaged thresholds directory as a whole
                                   (the benchmarks' own rules are read first either way)
      thresholds/models/*.yaml
      fixtures/recordings/manifest.yaml   entries for the project's models (an entry for a
                                          model the package also lists replaces it)
      fixtures/cards/<model>.yaml  what a run cannot know for a model's Fairness Card

The project directory is ``--project-dir`` (``$FAIRNESS_PROJECT_DIR``), else the
current directory when it holds ``thresholds/`` or a ``[tool.fairness_tests]`` table
in its ``pyproject.toml``; otherwise there is no project and the packaged defaults
apply. ``[tool.fairness_tests]`` may move the three locations (paths relative to
the project directory)::

    [tool.fairness_tests]
    thresholds = "fairness/thresholds"
    recordings = "fairness/recordings/manifest.yaml"
    cards = "fairness/cards"
    n_boot = 5000                  # any option of a command (see pipeline/config.py)

Keys other than the three locations are option values, below the command line and the
pytest options in precedence; the configuration spec validates them
(:func:`fairness_tests.core.options.check_toml_keys`).

Whole-directory semantics for thresholds: the rules in force come from ONE
directory (``--thresholds``, else the project's, else the packaged one), so a rule a
project removes cannot come back from the package.
"""
from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

from fairness_tests.core.errors import ConfigError
from fairness_tests.core.paths import data_path
from fairness_tests.core.validate import check_data, read_text

ENV_PROJECT_DIR = "FAIRNESS_PROJECT_DIR"
TABLE = "fairness_tests"
DEFAULT_LOCATIONS = {"thresholds": "thresholds",
                     "recordings": "fixtures/recordings/manifest.yaml",
                     "cards": "fixtures/cards"}


@dataclass(frozen=True)
class Project:
    """The project directory in force (``root`` None: packaged defaults only)."""
    root: Path | None = None
    thresholds: Path | None = None       # the project's thresholds directory, when it has one
    manifest: Path | None = None         # the project's recordings manifest, when it has one
    cards: Path | None = None            # the project's card YAML directory, when it has one
    options: Mapping[str, Any] = field(default_factory=dict)   # option keys of the table
    pyproject: Path | None = None        # where the table is

    def thresholds_dir(self) -> Path:
        """The thresholds directory in force: the project's, else the packaged one."""
        return self.thresholds or packaged_thresholds_dir()

    def manifests(self) -> list[Path]:
        """Recording manifests, first match wins: the project's, then the packaged one."""
        return ([self.manifest] if self.manifest else []) + [packaged_manifest()]

    def card_yaml(self, model: str | None) -> Path | None:
        """``<cards>/<model slug>.yaml``: the project's, else the packaged one, if any."""
        if not model:
            return None
        name = f"{model_slug(model)}.yaml"
        for d in (self.cards, data_path("cards")):
            if d is not None and (d / name).is_file():
                return d / name
        return None


def packaged_thresholds_dir() -> Path:
    return data_path("thresholds")


def packaged_manifest() -> Path:
    return data_path("recordings", "manifest.yaml")


def model_slug(model: str) -> str:
    """A model id as a file name (the one mapping: ``init`` writes, the card lookup
    reads): every character but letters, digits, ``-``, ``.``, ``_`` becomes ``-``, a
    run of dots ``-`` and leading dots are dropped, so the name has no separator, no
    ``..`` and is not hidden: ``embedded:gemma-3-270m`` -> ``embedded-gemma-3-270m``,
    ``my model/../x`` -> ``my-model---x``."""
    name = "".join(c if c.isalnum() or c in "-._" else "-" for c in model)
    return re.sub(r"\.{2,}", "-", name).lstrip(".") or "-"


def _read_table(pyproject: Path) -> dict | None:
    """The ``[tool.fairness_tests]`` table of a pyproject.toml (None when absent)."""
    try:
        doc = tomllib.loads(read_text(pyproject))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not valid TOML ({exc})", path=pyproject) from None
    table = doc.get("tool", {}).get(TABLE)
    if table is None:
        return None
    check_data(table, "project", source=f"{pyproject} [tool.{TABLE}]")
    return table


def is_project_dir(path: Path) -> bool:
    """A directory holding ``thresholds/`` or a ``[tool.fairness_tests]`` table."""
    if (path / "thresholds").is_dir():
        return True
    pp = path / "pyproject.toml"
    return pp.is_file() and _read_table(pp) is not None


def find_project(explicit: str | os.PathLike | None = None) -> Project:
    """The project in force: ``explicit``, ``$FAIRNESS_PROJECT_DIR``, the current
    directory when it is a project directory, else none (packaged defaults)."""
    chosen = explicit or os.environ.get(ENV_PROJECT_DIR)
    if chosen:
        root = Path(chosen)
        if not root.is_dir():
            raise ConfigError("project directory does not exist", path=root)
    else:
        root = Path.cwd()
        if not is_project_dir(root):
            return Project()
    pp = root / "pyproject.toml"
    table = (_read_table(pp) if pp.is_file() else None) or {}
    where = {k: root / table.get(k, v) for k, v in DEFAULT_LOCATIONS.items()}
    for k in DEFAULT_LOCATIONS.keys() & table.keys():
        if not where[k].exists():      # a location the table names explicitly must exist
            raise ConfigError(f"{table[k]!r} does not exist in {root}", path=pp,
                              key=f"tool.{TABLE}.{k}")
    return Project(root=root,
                   thresholds=where["thresholds"] if where["thresholds"].is_dir() else None,
                   manifest=where["recordings"] if where["recordings"].is_file() else None,
                   cards=where["cards"] if where["cards"].is_dir() else None,
                   options={k: v for k, v in table.items() if k not in DEFAULT_LOCATIONS},
                   pyproject=pp if pp.is_file() else None)
