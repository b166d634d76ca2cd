"""Where things live: packaged data files and user-chosen directories.

Nothing here touches the network. Directories are chosen by CLI option, then an
environment variable, then a default next to the repository (``../shared``).
"""
from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
DATA_DIR = PACKAGE_DIR / "data"              # rubrics, suites, schemas shipped with the package
REPO_DIR = PACKAGE_DIR.parent                 # the checkout (for a source install)

ENV_BBQ_DIR = "FAIRNESS_BBQ_DIR"
ENV_SHARED_DIR = "FAIRNESS_SHARED_DIR"
ENV_STORE = "FAIRNESS_STORE"


def shared_dir() -> Path:
    """``$FAIRNESS_SHARED_DIR`` or ``../shared`` beside the checkout."""
    env = os.environ.get(ENV_SHARED_DIR)
    return Path(env) if env else REPO_DIR.parent / "shared"


def bbq_dir(explicit: str | os.PathLike | None = None) -> Path:
    """The BBQ data directory: explicit argument, ``$FAIRNESS_BBQ_DIR``, or ``<shared>/bbq``."""
    if explicit:
        return Path(explicit)
    env = os.environ.get(ENV_BBQ_DIR)
    return Path(env) if env else shared_dir() / "bbq"


def fairness_cards_dir() -> Path:
    """The published generative audit material: ``<shared>/fairness_cards``."""
    return shared_dir() / "fairness_cards"


def default_store_path() -> Path:
    """``$FAIRNESS_STORE`` or ``.fairness/store.sqlite`` in the working directory."""
    env = os.environ.get(ENV_STORE)
    return Path(env) if env else Path.cwd() / ".fairness" / "store.sqlite"


def display_path(path: str | os.PathLike) -> str:
    """A path as it may appear in a card or a committed run: relative to the checkout
    (or to the folder beside it, e.g. ``../shared/bbq``), never this machine's absolute
    path; outside both, the bare file name."""
    # normalised, not resolved: ../shared may be a symbolic link to elsewhere
    p = Path(os.path.abspath(path))
    for base, prefix in ((REPO_DIR, ""), (REPO_DIR.parent, "../")):
        try:
            return prefix + p.relative_to(os.path.abspath(base)).as_posix()
        except ValueError:
            continue
    return p.name
