"""The registered benchmarks' own rule files (``Benchmark.rules``: a thresholds file
beside a benchmark's module), read before the thresholds file in force
(:func:`fairness_tests.rules.thresholds.load_rules`)."""
from __future__ import annotations

from importlib import resources
from pathlib import Path

import yaml

from fairness_tests.core.errors import ConfigError
from fairness_tests.core.registry import load_all
from fairness_tests.core.validate import load_yaml, read_text


def benchmark_rule_files() -> list[Path]:
    """Every registered benchmark's own default rules (``Benchmark.rules``: a file beside
    its module), in registry order, each once (the benchmarks of one folder may share
    one). They are read first, then the thresholds file in force, then its per-model
    overrides: a benchmark's rule that the thresholds file (or an override) also defines
    is taken as they define it, field by field."""
    return list(rule_owners())


def rule_owners() -> dict[Path, tuple[str, ...]]:
    """``{a benchmark's rules file: the benchmarks that declare it}``, registry order."""
    out: dict[Path, tuple[str, ...]] = {}
    for cls in load_all():
        name = getattr(cls, "rules", None)
        if name:
            path = Path(str(resources.files(cls.__module__).joinpath(name)))
            out[path] = (*out.get(path, ()), cls.name)
    return out


def own_rule_files(default_path: Path) -> list[Path]:
    """The benchmarks' own rule files read before the thresholds file ``default_path``
    (:func:`benchmark_rule_files`), none when that file says ``benchmark_rules: false``
    (it is then the whole rule set)."""
    try:
        raw = load_yaml(read_text(default_path)) if default_path.exists() else None
    except (ConfigError, yaml.YAMLError):
        raw = None                        # the validator reports it, with its line
    if isinstance(raw, dict) and raw.get("benchmark_rules") is False:
        return []
    return benchmark_rule_files()
