"""The seeds a generative protocol declares, read without building its grid (cheap enough
for option checks: YAML or the published grid's ``seed`` column, no pandas)."""
from __future__ import annotations

import csv
from pathlib import Path

import yaml

from fairness_tests.core.paths import DATA_DIR
from fairness_tests.core.validate import load_yaml

DEFAULT_SUITE = DATA_DIR / "suites" / "default.yaml"


def protocol_seeds(suite: str | Path | None = None,
                   published_grid: str | Path | None = None) -> list[int] | None:
    """The sorted seeds of the suite YAML (default: the packaged suite) or of the
    published grid CSV; None when the file cannot be read or holds no seed list (the
    protocol's own loader reports what is wrong with it)."""
    try:
        if published_grid:
            with Path(published_grid).open(newline="", encoding="utf-8") as fh:
                return sorted({int(r["seed"]) for r in csv.DictReader(fh)})
        raw = load_yaml(Path(suite or DEFAULT_SUITE).read_text(encoding="utf-8"))
        seeds = raw.get("seeds") if isinstance(raw, dict) else None
        return sorted({int(s) for s in seeds}) if isinstance(seeds, list) else None
    except (OSError, ValueError, TypeError, KeyError, yaml.YAMLError, csv.Error):
        return None
