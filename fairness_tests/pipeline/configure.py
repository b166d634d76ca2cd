"""Building a configuration from its sources, the same way for every entry point.

Precedence, lowest first: the option's default; for an audit, the settings the model's
recordings were made with (its manifest entry: replay asks exactly what was recorded);
the project's ``[tool.fairness_tests]`` table; the pytest ini keys; the command line or
the pytest options; values the Python API passes. :func:`fairness_tests.core.options.build`
converts and checks them all, every problem at once, each named as its source spells it.
"""
from __future__ import annotations

import argparse
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from fairness_tests.core.option_sources import (
    check_toml_keys,
    cli_flags,
    from_namespace,
    toml_layer,
)
from fairness_tests.core.options import Layer, build, convert, python_spelling, specs
from fairness_tests.core.paths import display_path
from fairness_tests.core.project import DEFAULT_LOCATIONS, TABLE, find_project
from fairness_tests.core.registry import load, load_all
from fairness_tests.pipeline.config import (
    COMMANDS,
    DEFAULT_BENCHMARKS,
    DEFAULT_MODEL,
    AuditConfig,
)
from fairness_tests.pipeline.config_benchmarks import for_benchmarks, with_file
from fairness_tests.pipeline.config_tools import TOOLS
from fairness_tests.pipeline.recordings import recording_for
from fairness_tests.run.metadata import OptionValue


def project_layers(cls: type) -> list[Layer]:
    """The project's ``[tool.fairness_tests]`` values of ``cls``'s options (none when there
    is no project or no table); a key that is no option of any command is an error."""
    project = find_project()
    if not project.options:
        return []
    source = f"{project.pyproject} [tool.{TABLE}]"
    check_toml_keys(project.options, (*COMMANDS, *TOOLS, *benchmark_configs()),
                    DEFAULT_LOCATIONS, source)
    return [toml_layer(cls, project.options, source)]


def _model(layers: Sequence[Layer]) -> str:
    model = DEFAULT_MODEL
    for layer in layers:
        value = layer.values.get("model")
        if isinstance(value, (list, tuple)):
            value = value[-1] if value else None
        if value:
            model = str(value)
    return model


def benchmark_configs() -> list[type]:
    """The configuration classes of the registered benchmarks' own commands
    (``Benchmark.configs``)."""
    return [load(spec) for b in load_all() for spec in b.configs]


def _asked(layers: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """The benchmarks a run built from ``layers`` (values, lowest precedence first) asks:
    the last ``benchmarks`` given (the default ones if none is), read as the option
    reads it, and the file rule (:func:`~.config_benchmarks.with_file`). A value the
    option refuses counts as not given: :func:`build` reports it."""
    spec = specs(AuditConfig)["benchmarks"]
    names: tuple[str, ...] = DEFAULT_BENCHMARKS
    for values in layers:
        try:
            names = tuple(convert(values["benchmarks"], spec.kind, spec.option)) \
                if values.get("benchmarks") else names
        except ValueError:
            pass
    return with_file(names, any(values.get("benchmark_file") for values in layers))


def audit_config(*layers: Layer, cls: type = AuditConfig, defaults: Sequence[Layer] = (),
                 **values: Any) -> Any:
    """The audit configuration of ``layers`` (entry-point values, lowest precedence
    first) and ``values`` (Python API), over the project's own defaults (``defaults``:
    e.g. the pytest ini file's keys, above the project's table) and the settings the
    model's recordings were made with. The layers of defaults (the settings, the
    project's table, ``defaults``) set a benchmark's own options only for a run that asks
    it (:func:`~.config_benchmarks.for_benchmarks`)."""
    project = [*project_layers(cls), *defaults]
    given = [*layers, Layer(values, python_spelling)]
    rec = recording_for(_model([*project, *given]))
    base = []
    if rec is not None and rec.settings:
        where = f"{display_path(rec.manifest) if rec.manifest else 'manifest'} (settings " \
                f"of {rec.model})"
        base = [Layer(rec.settings, lambda n: f"{where} {n}")]
    asked = _asked([layer.values for layer in (*base, *project, *given)])
    defaults = [Layer(for_benchmarks(layer.values, asked), layer.spell)
                for layer in (*base, *project)]
    return build(cls, [*defaults, *given])


def command_config(cls: type, args: argparse.Namespace, **fixed: Any) -> Any:
    """A command's configuration from its parsed command line over the project's table
    (``fixed``: values the command sets itself)."""
    return from_namespace(cls, args, project_layers(cls), extra=fixed or None)


def regen_command(config: AuditConfig) -> str:
    """The ``fairness-tests audit`` command line that reproduces every choice of this run
    that can change a number."""
    return command_line(config, ("fairness-tests", "audit"))


def command_line(config: Any, words: Sequence[str]) -> str:
    """The command line (``words`` + options) that gives ``config``: every option declared
    ``regen`` (it can change a number) whose value is not its default, paths as
    :func:`~fairness_tests.core.paths.display_path` shows them."""
    parts = list(words)
    cls = type(config)
    for name, s in specs(cls).items():
        value = getattr(config, name)
        o = s.option
        if not o.regen or not o.cli or value == s.default:
            continue
        flag = [] if o.positional else [cli_flags(cls, name)[0]]
        if isinstance(value, bool):
            parts.append(flag[0] if value else f"--{o.negative}")
        elif value is None:
            if o.none_word:
                parts += [*flag, o.none_word]
        elif isinstance(value, tuple):
            parts += [*flag, *(display_path(v) if o.path else str(v) for v in value)]
        else:
            parts += [*flag, display_path(value) if o.path else str(value)]
    return shlex.join(parts)


def recorded_config(config: Any) -> dict[str, OptionValue]:
    """``config`` as a run's metadata records it: every option, tuples as lists, and paths
    as :func:`~fairness_tests.core.paths.display_path` shows them (never this machine's
    absolute path)."""
    out: dict[str, OptionValue] = {}
    for name, s in specs(type(config)).items():
        value = getattr(config, name)
        if s.option.path and value is not None:
            value = [display_path(v) for v in value] if isinstance(value, tuple) \
                else display_path(value)
        out[name] = list(value) if isinstance(value, tuple) else value
    return out
