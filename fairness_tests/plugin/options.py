"""The plugin's options, generated from the configuration spec
(:mod:`fairness_tests.pipeline.config`): every audit option (``--fairness-<name>``, ini key
``fairness_<name>``, e.g. ``--fairness-n-boot`` / ``fairness_n_boot``) and the plugin's own
(:class:`~fairness_tests.pipeline.config.PluginOptions`). The command line wins over the ini
file, the ini file over the project's ``[tool.fairness_tests]`` table, that over the model's
recording settings and the defaults; every value is checked by the spec, the same way as
on the command line, and a bad one is a :class:`pytest.UsageError` (one line).

Loading this module imports neither pandas nor numpy: the configuration spec does not.
"""
from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from fairness_tests.core.errors import FairnessTestsError
from fairness_tests.core.option_sources import (
    add_pytest_options,
    pytest_fields,
    pytest_layers,
    pytest_spelling,
)
from fairness_tests.core.options import Layer, build, path_args
from fairness_tests.core.outputs import check_paths
from fairness_tests.core.project import ENV_PROJECT_DIR, is_project_dir
from fairness_tests.pipeline.config import DEFAULT_MODEL, AuditConfig, PluginOptions

GROUP = ("fairness", "fairness_tests: models, recordings, thresholds, gate")


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup(*GROUP)
    for cls in (PluginOptions, AuditConfig):
        add_pytest_options(parser, group, cls)


@dataclass(frozen=True)
class Settings:
    """The session's options: the plugin's own and, per model, its audit configuration."""
    plugin: PluginOptions = field(default_factory=PluginOptions)
    models: tuple[str, ...] = (DEFAULT_MODEL,)
    audits: dict[str, AuditConfig] = field(default_factory=dict)

    @property
    def baseline(self) -> str | None:
        return self.plugin.baseline_model

    @property
    def runs(self) -> tuple[str, ...]:
        return self.plugin.run or ()

    @property
    def live(self) -> bool:
        return any(a.live for a in self.audits.values())

    @property
    def on_missing(self) -> str:
        return self.plugin.on_missing

    @property
    def report_dir(self) -> str | None:
        return self.plugin.report

    @property
    def dry_run(self) -> bool:
        return self.plugin.dry_run

    def audit(self, model: str) -> AuditConfig:
        """The audit configuration of ``model`` (the session's options for it)."""
        return self.audits[model]


def _models(layers: list[Layer]) -> tuple[str, ...]:
    """The ``--fairness-model`` values (the command line's replace the ini file's)."""
    models: tuple[str, ...] = ()
    for layer in layers:
        value = layer.values.get("model")
        if value:
            models = tuple(value) if isinstance(value, (list, tuple)) else (value,)
    return models


def requested(config: pytest.Config) -> bool:
    """Whether the session uses the fairness suite: it names a fairness option or ini key,
    or runs in a project directory (``thresholds/`` or ``[tool.fairness_tests]``). Then
    the options and thresholds are checked at start, so a bad value is a usage error
    before collection."""
    if os.environ.get(ENV_PROJECT_DIR) or is_project_dir(Path.cwd()):
        return True
    for cls in (PluginOptions, AuditConfig):
        for name, s in pytest_fields(cls).items():
            dest = s.option.ini_key(name)
            if config.getoption(dest, None) is not None or config.getini(dest) not in (
                    None, "", []):
                return True
    return False


def settings_from(getoption: Callable[[str], Any], getini: Callable[[str], Any],
                  saved_model: Callable[[str], str]) -> Settings:
    """The session's :class:`Settings` from pytest's option and ini readers (a bad value
    raises :class:`~fairness_tests.core.errors.FairnessTestsError`)."""
    from fairness_tests.pipeline.configure import audit_config, project_layers  # noqa: PLC0415  (project_layers reads the recordings manifest: only when the plugin is used)
    plugin = build(PluginOptions, [*project_layers(PluginOptions),
                                   *pytest_layers(PluginOptions, getoption, getini)])
    layers = pytest_layers(AuditConfig, getoption, getini)
    models = _models(layers)
    if not models and plugin.run:
        models = tuple(dict.fromkeys(saved_model(d) for d in plugin.run))
    models = models or (DEFAULT_MODEL,)
    per_model = [Layer({k: v for k, v in layer.values.items() if k != "model"}, layer.spell)
                 for layer in layers]
    wanted = list(dict.fromkeys([*models, *([plugin.baseline_model]
                                            if plugin.baseline_model else [])]))
    spell = pytest_spelling(AuditConfig)          # a bad model id is named --fairness-model
    ini, given = per_model                        # the ini file is the project's default
    audits = {m: audit_config(given, Layer({"model": m}, spell), defaults=[ini])
              for m in wanted}
    check_paths([*path_args(plugin, pytest_spelling(PluginOptions)),    # the command's rule
                 *path_args(audits[models[0]], spell)])
    return Settings(plugin=plugin, models=models, audits=audits)


def settings(config: pytest.Config) -> Settings:
    try:
        return settings_from(config.getoption, config.getini, saved_model)
    except FairnessTestsError as exc:
        raise pytest.UsageError(str(exc)) from None


def saved_model(directory: str) -> str:
    """The model id a saved run directory is of (its run.json)."""
    from fairness_tests.run.result import RunResult  # noqa: PLC0415  (pandas: only when used)
    try:
        try:        # run.json only; a directory it does not describe is read whole, to fail
            model = json.loads((Path(directory) / "run.json").read_text(encoding="utf-8"))[
                "model"]
        except (OSError, ValueError, KeyError, TypeError):
            model = RunResult.load(directory).metadata.model
    except FairnessTestsError as exc:
        raise pytest.UsageError(f"--fairness-run {directory}: {exc}") from None
    if not model:
        raise pytest.UsageError(f"--fairness-run {directory}: the run names no model (score "
                                "it again with --model ID)")
    return model
