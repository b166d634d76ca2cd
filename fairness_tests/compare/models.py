"""The models of a comparison: one :class:`Entry` per model, from run directories.

A model's results may sit in one run directory (an audit of several benchmarks) or in
several (a score command's ``--out`` for predictions made elsewhere, one per benchmark
family): run directories given the same name are one model, provided they hold
different benchmark families. Names come from ``--names`` (one per directory, in
order) or from each run's metadata (``model``). Models keep the order in which they
were first named.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from fairness_tests.core.errors import ConfigError
from fairness_tests.pipeline.benchmark import FamilySpec, families, family_tables
from fairness_tests.run.result import RunResult

PLACEHOLDER = "unknown"      # what a score command names a model it was not told


def compared() -> tuple[FamilySpec, ...]:
    """The benchmark families ``compare`` has sections for (``FamilySpec.compared``), in
    registry order: a comparison's "benchmarks" are these families' names."""
    return tuple(f for f in families() if f.compared)


def compared_names() -> list[str]:
    """The names of :func:`compared`."""
    return [f.name for f in compared()]


def families_of(run: RunResult) -> list[str]:
    """The compared families a run holds results of: those with any of the tables that
    show one of their benchmarks ran (``Benchmark.tables``)."""
    return [f.name for f in compared() if any(t in run.tables for t in family_tables(f))]


@dataclass
class Entry:
    """One model: its name and, per compared family, the run that holds its results."""
    name: str
    runs: dict[str, RunResult] = field(default_factory=dict)      # family -> run
    sources: dict[str, str] = field(default_factory=dict)         # family -> where from

    def run(self, family: str) -> RunResult | None:
        return self.runs.get(family)

    def table(self, family: str, name: str):
        """The run's own table ``name`` (None when that run has no such table)."""
        run = self.runs.get(family)
        return None if run is None else run.tables.get(name)


def entries_from_runs(runs: dict[str, RunResult],
                      sources: dict[str, str] | None = None) -> list[Entry]:
    """One entry per named run (the pytest plugin's shape: model name -> run)."""
    out = []
    for name, run in runs.items():
        e = Entry(name=str(name))
        for proto in families_of(run):
            e.runs[proto] = run
            e.sources[proto] = (sources or {}).get(name, str(name))
        out.append(e)
    return out


def load_entries(dirs: list[str | Path], names: list[str] | None = None) -> list[Entry]:
    """Entries of run directories (see the module docstring). Errors name the directory:
    not a run, no compared family's results, two runs of one name with the same family, a name
    count that does not match, fewer than two models."""
    if names is not None and len(names) != len(dirs):
        raise ConfigError(f"--names gives {len(names)} name(s) for {len(dirs)} run "
                          "directories: give one name per run directory, in order",
                          key="--names")
    by_name: dict[str, Entry] = {}
    for i, d in enumerate(dirs):
        run = RunResult.load(d)
        name = (names[i] if names is not None else run.metadata.model or "").strip()
        if not name:
            raise ConfigError(f"empty model name for run directory {d}", key="--names")
        protos = families_of(run)
        if not protos:
            tables = [t for f in compared() for t in family_tables(f)]
            raise ConfigError(f"run directory {d} holds no {' or '.join(compared_names())} results "
                              f"(no table {', '.join(tables)})")
        e = by_name.setdefault(name, Entry(name=name))
        for proto in protos:
            if proto in e.runs:
                hint = (" (runs made by a score command without --model are all named "
                        f"{PLACEHOLDER!r})" if name == PLACEHOLDER else "")
                raise ConfigError(
                    f"two run directories named {name!r} both hold {proto} results: "
                    f"{e.sources[proto]} and {d}{hint}; name the models with --names a,b,...",
                    key="--names")
            e.runs[proto] = run
            e.sources[proto] = str(d)
    entries = list(by_name.values())
    if len(entries) < 2:
        raise ConfigError(f"compare needs at least two models, got {len(entries)} "
                          f"({', '.join(e.name for e in entries)})")
    return entries
