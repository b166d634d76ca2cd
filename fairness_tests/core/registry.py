"""The benchmark registry: what an audit can ask, by name (no import of a benchmark).

A benchmark is registered as an entry point of the group ``fairness_tests.benchmarks``
(as pytest finds its plugins in ``pytest11``): the name is the entry point's, the value
``"module:Class"`` names its :class:`~fairness_tests.pipeline.benchmark.Benchmark`. The
built-in ones (``fairness_tests/benchmarks/<name>/``) are registered the same way, in this
package's ``pyproject.toml``; a benchmark of another distribution is found once that
distribution is installed, with no line of this package changed.

The entries are read from the installed distributions' metadata (no import): this
package's own first, in the order its ``pyproject.toml`` lists them, then the others
sorted by name. :func:`load_all` imports every benchmark's (light) module, which
registers what it declares (its tables, :func:`fairness_tests.metrics.schema.register_table`;
its run metadata, :func:`fairness_tests.run.metadata.register_info`); the typed accessors
(:func:`fairness_tests.pipeline.benchmark.benchmarks`, ``families``) live beside the
interface.
"""
from __future__ import annotations

import importlib
from collections.abc import Iterable
from importlib.metadata import distributions
from typing import Any

from fairness_tests.core.errors import ConfigError

#: the entry-point group a benchmark registers in
GROUP = "fairness_tests.benchmarks"
#: the distribution whose benchmarks come first (the built-in ones)
OWN = "fairness-tests"


def _dist_name(dist: Any) -> str:
    return str(dist.metadata["Name"] or "").lower().replace("_", "-")


def _registered() -> dict[str, str]:
    """``{name: "module:Class"}`` of every installed benchmark: this package's in its
    declared order, then the others sorted by name. Two distributions registering one
    name is a :class:`ConfigError` naming both."""
    own: dict[str, str] = {}
    other: set[tuple[str, str]] = set()
    # every distribution's entries, not entry_points()'s first distribution of a name; of
    # this package, the installed metadata (``*.dist-info``) over a source checkout's
    # stale ``*.egg-info``, which sits first on sys.path when run from the checkout
    mine = sorted((d for d in distributions() if _dist_name(d) == OWN),
                  key=lambda d: not str(getattr(d, "_path", "")).endswith(".dist-info"))
    for d in mine[:1]:
        own = {ep.name: ep.value for ep in d.entry_points if ep.group == GROUP}
    for d in distributions():
        if _dist_name(d) != OWN:
            other |= {(ep.name, ep.value) for ep in d.entry_points if ep.group == GROUP}
    if not own:
        raise ConfigError("the built-in benchmarks are not registered: the fairness-tests "
                          "distribution is not installed (pip install -e .)")
    found = dict(own)
    for name, value in sorted(other):
        if name in found and found[name] != value:
            raise ConfigError(f"benchmark {name!r} is registered twice (entry points "
                              f"{found[name]} and {value} of group {GROUP})")
        found[name] = value
    return found


REGISTRY: dict[str, str] = _registered()
BENCHMARK_NAMES: tuple[str, ...] = tuple(REGISTRY)


def load(target: str) -> Any:
    """The object ``"module:attr"`` names (its module imported on first use)."""
    module, attr = target.split(":")
    return getattr(importlib.import_module(module), attr)


def load_all() -> tuple[Any, ...]:
    """Every registered benchmark class, in registry order (importing each module
    registers its declarations)."""
    return tuple(load(REGISTRY[name]) for name in REGISTRY)


def cluster_choices() -> dict[str, tuple[str, ...]]:
    """``{family: its --cluster units}`` of every gated family (``FamilySpec.clusters``;
    the first is the default), in registry order."""
    return {b.family.name: tuple(b.family.clusters) for b in load_all()
            if b.family.gated and b.family.clusters}


def default_clusters() -> dict[str, str]:
    """``{family: its default resampling unit}``: the first of its choices."""
    return {name: choices[0] for name, choices in cluster_choices().items()}


def units_text() -> str:
    """``"bbq=template|item; ..."``: every gated family's units, for help and errors."""
    return "; ".join(f"{f}={'|'.join(c)}" for f, c in cluster_choices().items())


def cluster_units(values: Iterable[str] | None) -> dict[str, str]:
    """``{family: unit}`` from ``--cluster`` values: ``FAMILY=UNIT``, or a bare ``UNIT``
    for every gated family whose ``clusters`` have it. ValueError naming the choices for
    an unknown family or unit, or a family given two units."""
    choices = cluster_choices()
    known = units_text()
    out: dict[str, str] = {}
    for v in values or ():
        fam, _, unit = v.rpartition("=")
        fams = [fam] if fam else [f for f, c in choices.items() if unit in c]
        if not fams or any(unit not in choices.get(f, ()) for f in fams):
            raise ValueError(f"unknown resampling unit {v!r}; the families' units: {known}")
        for f in fams:
            if out.get(f, unit) != unit:
                raise ValueError(f"two resampling units for {f}: {out[f]} and {unit}")
            out[f] = unit
    return out


def data_sources() -> dict[str, str]:
    """``{name: "module:NAME"}`` of every registered benchmark that declares where its
    data comes from (``Benchmark.source``: what ``data fetch --benchmark NAME``
    installs), in registry order."""
    return {name: b.source for name, b in zip(REGISTRY, load_all(), strict=True)
            if getattr(b, "source", None)}
