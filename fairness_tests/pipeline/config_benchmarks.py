"""The options every benchmark family reads through the configuration spec
(:mod:`fairness_tests.pipeline.config`): the resampling unit of its tables' intervals
(``--cluster FAMILY=UNIT``, its ``FamilySpec.clusters``; the gate takes the same), the
registered benchmarks' own option groups (``Benchmark.option_group``), and
``--benchmark FILE``: a team's own benchmark in one YAML file, read by the registered
benchmarks that declare ``reads_benchmark_file``. A run given ``--benchmark FILE`` whose
benchmarks name none of those (the default benchmarks, or a model's recording settings)
asks those only; to run one beside others, name them all (``--benchmarks bbq templates``)."""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fairness_tests.core.options import Checked, opt
from fairness_tests.core.registry import (
    BENCHMARK_NAMES,
    cluster_units,
    default_clusters,
    load,
    load_all,
    units_text,
)

#: the registered benchmarks that read ``--benchmark FILE``
FILE_BENCHMARKS: tuple[str, ...] = tuple(
    b.name for b in load_all() if b.reads_benchmark_file)


@dataclass(frozen=True, kw_only=True)
class BenchmarkClusterOption(Checked):
    cluster: tuple[str, ...] | None = opt(
        None, "bootstrap unit of a benchmark family's intervals: FAMILY=UNIT, or UNIT for all "
        f"families with it ({units_text()}; default: the first; a benchmark's own unit "
        "option, such as --bbq-cluster, is read too)", metavar="[FAMILY=]UNIT", regen=False)

    def cluster_of(self, family: str) -> str:
        """The unit ``family``'s tables resample: ``--cluster``'s, else its first."""
        return {**default_clusters(), **cluster_units(self.cluster)}.get(family, "item")

    def cross_check(self) -> Iterable[tuple[str, str]]:
        yield from cluster_problems(self.cluster)


def cluster_problems(values: Iterable[str] | None) -> Iterable[tuple[str, str]]:
    """``("cluster", why)`` when ``--cluster`` values name an unknown family or unit, or
    two units for one family (:func:`fairness_tests.core.registry.cluster_units`)."""
    try:
        cluster_units(values)
    except ValueError as exc:
        yield "cluster", str(exc)


#: the registered benchmarks' own option groups (``Benchmark.option_group``: a frozen,
#: keyword-only :class:`~fairness_tests.core.options.Checked` dataclass), in registry order:
#: the audit's configuration inherits them all
OPTION_GROUPS: tuple[type, ...] = tuple(dict.fromkeys(
    load(b.option_group) for b in load_all() if b.option_group))


def own_options(bench: Any) -> tuple[str, ...]:
    """The audit options only ``bench`` reads: its ``options`` and its option group's."""
    group = load(bench.option_group) if bench.option_group else None
    fields = tuple(f.name for f in dataclasses.fields(group)) if group else ()
    return tuple(dict.fromkeys((*bench.options, *fields)))


def owners() -> dict[str, list[str]]:
    """``{option: the benchmarks that read it}`` of every benchmark's own options
    (:func:`own_options`), in registry order."""
    out: dict[str, list[str]] = {}
    for bench in load_all():
        for name in own_options(bench):
            out.setdefault(name, []).append(bench.name)
    return out


def unasked_options(config: object) -> Iterable[tuple[str, str]]:
    """``(option, why)`` for each option given (not at its default) that only benchmarks
    this run does not ask read (:func:`own_options`)."""
    asked = set(getattr(config, "benchmarks", ()))
    defaults = {f.name: f.default for f in dataclasses.fields(config)}  # type: ignore[arg-type]
    for name, names in owners().items():
        if getattr(config, name) != defaults.get(name) and not asked & set(names):
            yield name, (f"applies to {' and '.join(names)}, which this run does not ask "
                         f"(benchmarks: {' '.join(sorted(asked, key=BENCHMARK_NAMES.index))})")


def group_problems(config: object) -> Iterable[tuple[str, str]]:
    """The cross-field rules of every registered option group (its own ``cross_check``,
    where it declares one), checked on the audit configuration that inherits them."""
    checks = dict.fromkeys(vars(cls)["cross_check"] for group in OPTION_GROUPS
                           for cls in group.__mro__
                           if "cross_check" in vars(cls) and cls is not Checked)
    for check in checks:
        yield from check(config)


def for_benchmarks(values: Mapping[str, Any], asked: Iterable[str]) -> dict[str, Any]:
    """``values`` of a layer of defaults (a model's recording settings, the project's
    table) without the options that only benchmarks outside ``asked`` read: such a layer
    sets them for the runs that ask those benchmarks and says nothing to the others (a
    value given on the command line or by the Python API is still an error there:
    :func:`unasked_options`)."""
    own = owners()
    names = set(asked)
    return {k: v for k, v in values.items() if k not in own or names & set(own[k])}


@dataclass(frozen=True, kw_only=True)
class BenchmarkFileOption(Checked):
    """A team's own benchmark file (see the module docstring)."""
    benchmark_file: str | None = opt(
        None, "a team's own benchmark: a YAML file of templates, attribute lists and an "
        "outcome (docs/benchmarks.md); without --benchmarks the run asks only it",
        flag="--benchmark", pytest_name="benchmark", metavar="FILE", path=True, role="input")

    def __post_init__(self) -> None:
        names = getattr(self, "benchmarks", None)
        given = (names,) if isinstance(names, str) else tuple(names or ())
        object.__setattr__(self, "benchmarks", with_file(given, bool(self.benchmark_file)))
        super().__post_init__()


def with_file(names: tuple[str, ...], file: bool) -> tuple[str, ...]:
    """The benchmarks a run asks: ``names``, or, given a benchmark file (``file``) and
    ``names`` naming none of the benchmarks that read it, those (:data:`FILE_BENCHMARKS`)."""
    if file and FILE_BENCHMARKS and not set(FILE_BENCHMARKS) & set(names):
        return FILE_BENCHMARKS
    return names
