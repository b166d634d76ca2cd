"""The configuration spec of the smaller tools: cards, compare, init, the store, the
model cache, data fetch. (The audit, the gate and the plugin are in
:mod:`fairness_tests.pipeline.config`, a benchmark's own commands in its folder; the same
machinery builds them all.)"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

from fairness_tests.core.errors import suggest
from fairness_tests.core.options import Checked, opt
from fairness_tests.models.requests.request import STATUSES
from fairness_tests.pipeline.config import (
    DEFAULT_MODEL,
    EMBEDDED_MODELS,
    ComparisonOptions,
    ResampleOptions,
    StatsOptions,
)
from fairness_tests.pipeline.config_data import DataFetchConfig

# ----------------------------------------------------------------------------- cards

@dataclass(frozen=True, kw_only=True)
class CardConfig(Checked):
    """``fairness-tests card --run RUN_DIR --out DIR``: the Fairness Card of a run."""
    run: str | None = opt(None, "run directory (run.json, tables/, verdicts.csv)",
                          metavar="RUN_DIR", path=True, pytest=False, toml=False)
    out: str | None = opt(None, "output directory for card.yaml/.md/.html", metavar="DIR",
                          path=True, pytest=False, toml=False, role="output_dir")
    user_yaml: str | None = opt(None, "fields a run cannot know (intended use, harm model, "
                                "governance, ...); template: fairness_tests/data/"
                                "card_user_example.yaml", metavar="FILE", path=True,
                                pytest=False, toml=False)
    gate: str | None = opt(None, "the upgrade gate with this run as the candidate: gate.json "
                           "or the directory `fairness-tests gate --out` wrote", metavar="GATE",
                           path=True, pytest=False, toml=False)
    explorer: str | None = opt(None, "link the card to this run explorer (`fairness-tests "
                               "view --out`): its index.html, relative to --out or a URL, "
                               "written as given", metavar="HREF", pytest=False, toml=False)

    def cross_check(self):
        for name in ("run", "out"):
            if getattr(self, name) is None:
                yield name, ("must be given: card --run RUN_DIR --out DIR (or: card validate "
                             "FILE, card render CARD --out DIR, card diff A B)")


@dataclass(frozen=True, kw_only=True)
class CardValidateConfig(Checked):
    file: str = opt(None, "the card YAML", positional=True, metavar="FILE", path=True,
                    pytest=False, toml=False)
    complete: bool = opt(False, "also fail (exit 1) when the card declares missing fields",
                         pytest=False, toml=False)


@dataclass(frozen=True, kw_only=True)
class CardRenderConfig(Checked):
    file: str = opt(None, "the card YAML", positional=True, metavar="CARD", path=True,
                    pytest=False, toml=False)
    out: str = opt(None, "output directory for card.md and card.html", metavar="DIR",
                   path=True, pytest=False, toml=False, role="output_dir")


@dataclass(frozen=True, kw_only=True)
class CardDiffConfig(Checked):
    baseline: str = opt(None, "the baseline's card", positional=True, metavar="BASELINE",
                        path=True, pytest=False, toml=False)
    candidate: str = opt(None, "the candidate's card", positional=True, metavar="CANDIDATE",
                         path=True, pytest=False, toml=False)
    format: Literal["terminal", "markdown"] = opt("terminal", "output format", pytest=False,
                                                  toml=False)
    exit_code: bool = opt(False, "exit 1 when a verdict regressed (for CI gates)",
                          pytest=False, toml=False)


@dataclass(frozen=True, kw_only=True)
class CompareConfig(ResampleOptions, ComparisonOptions):
    """``fairness-tests compare RUN_DIR...``: N models side by side."""
    runs: tuple[str, ...] = opt(None, "run directories (two or more)", positional=True,
                                metavar="RUN_DIR", path=True, pytest=False, toml=False)
    out: str = opt(None, "where compare.md, compare.html and compare.csv are written",
                   metavar="DIR", path=True, pytest=False, toml=False,
                   role="output_dir")
    names: str | None = opt(None, "one model name per run directory, in order (default: "
                            "each run's model id); the same name twice = one model's runs of "
                            "two benchmark families", metavar="a,b,c", pytest=False, toml=False)

    def cross_check(self):
        if len(self.runs) < 2:
            yield "runs", f"give two or more run directories, got {len(self.runs)}"
        if self.names is not None and len(self.names.split(",")) != len(self.runs):
            yield "names", (f"gives {len(self.names.split(','))} name(s) for "
                            f"{len(self.runs)} run directories")


@dataclass(frozen=True, kw_only=True)
class ViewConfig(StatsOptions, ComparisonOptions):
    """``fairness-tests view RUN_DIR... --out DIR``: the run explorer."""
    runs: tuple[str, ...] = opt(None, "run directories: one, or a baseline then candidates",
                                positional=True, metavar="RUN_DIR", path=True, pytest=False,
                                toml=False)
    out: str = opt(None, "where the explorer (index.html) is written", metavar="DIR",
                   path=True, pytest=False, toml=False, role="output_dir")

    def cross_check(self):
        if not self.runs:
            yield "runs", "give one run directory, or a baseline and candidates"


# ----------------------------------------------------------------------------- set-up, store

@dataclass(frozen=True, kw_only=True)
class InitConfig(Checked):
    """``fairness-tests init``: the fairness suite in a repository."""
    dir: str = opt(".", "the repository", metavar="DIR", path=True, pytest=False,
                   toml=False, role="output_dir")
    model: str = opt(DEFAULT_MODEL, "the model the suite audits", metavar="MODEL",
                     pytest=False, toml=False)
    force: bool = opt(False, "overwrite files that exist", pytest=False, toml=False)

    def cross_check(self):
        if os.path.exists(self.dir) and not os.path.isdir(self.dir):
            yield "dir", f"{self.dir!r} is a file, not a directory"
        if self.model.startswith("embedded:") and self.model not in EMBEDDED_MODELS:
            yield "model", (f"unknown embedded model {self.model!r}"
                            f"{suggest(self.model, EMBEDDED_MODELS)}; embedded models: "
                            f"{', '.join(EMBEDDED_MODELS)}")


@dataclass(frozen=True, kw_only=True)
class StoreOption(Checked):
    store: str | None = opt(None, "SQLite store (default: $FAIRNESS_STORE or "
                            ".fairness/store.sqlite)", metavar="PATH", path=True,
                            pytest=False, role="inout")


@dataclass(frozen=True, kw_only=True)
class StoreStatsConfig(StoreOption):
    format: Literal["table", "json"] = opt("table", "output format", pytest=False,
                                           toml=False)


@dataclass(frozen=True, kw_only=True)
class StoreExportConfig(StoreOption):
    path: str = opt(None, "output file, e.g. fixtures/responses.jsonl.gz", positional=True,
                    metavar="PATH", pytest=False, toml=False, role="output_file")
    no_timestamps: bool = opt(False, "leave created_at out (byte-stable across "
                              "re-recordings)", pytest=False, toml=False)


@dataclass(frozen=True, kw_only=True)
class StoreImportConfig(StoreOption):
    paths: tuple[str, ...] = opt(None, "JSONL files written by `store export`",
                                 positional=True, metavar="PATH", pytest=False, toml=False,
                                 role="input")
    replace: bool = opt(False, "overwrite keys already stored", pytest=False, toml=False)


@dataclass(frozen=True, kw_only=True)
class StorePruneConfig(StoreOption):
    model: str | None = opt(None, "rows of this model", metavar="MODEL", pytest=False,
                            toml=False)
    backend: str | None = opt(None, "rows of this backend", metavar="NAME", pytest=False,
                              toml=False)
    status: str | None = opt(None, "rows of this status", choices=STATUSES, pytest=False,
                             toml=False)
    older_than: str | None = opt(None, "rows older than this, e.g. 30m, 12h, 7d",
                                 metavar="AGE", pytest=False, toml=False)


@dataclass(frozen=True, kw_only=True)
class StoreCapabilitiesConfig(StoreOption):
    model: str | None = opt(None, "records of this model", metavar="MODEL", pytest=False,
                            toml=False)
    server: str | None = opt(None, "records of this server (the api_base as recorded)",
                             metavar="URL", pytest=False, toml=False)
    forget: bool = opt(False, "delete the (matching) records: the next run asks those "
                       "servers again", pytest=False, toml=False)
    format: Literal["table", "json"] = opt("table", "output format", pytest=False,
                                           toml=False)


@dataclass(frozen=True, kw_only=True)
class StoreMergeConfig(Checked):
    sources: tuple[str, ...] = opt(None, "SQLite stores to merge", positional=True,
                                   metavar="STORE", pytest=False, toml=False,
                                   role="input")
    into: str = opt(None, "the store they are merged into (created when new)",
                    metavar="STORE", path=True, pytest=False, toml=False,
                    role="output_file")


@dataclass(frozen=True, kw_only=True)
class ModelPrepareConfig(Checked):
    cache: str | None = opt(None, "cache directory (default $FAIRNESS_CACHE or "
                            "~/.cache/fairness_tests)", metavar="DIR", path=True,
                            pytest=False, role="output_dir")
    force: bool = opt(False, "convert again even if cached", pytest=False, toml=False)


TOOLS: tuple[type, ...] = (CardConfig, CardValidateConfig, CardRenderConfig, CardDiffConfig,
                           CompareConfig, InitConfig, StoreStatsConfig, StoreExportConfig,
                           StoreImportConfig, StorePruneConfig, StoreMergeConfig,
                           StoreCapabilitiesConfig,
                           ModelPrepareConfig, DataFetchConfig)
