"""The benchmark registry: what an audit can ask, by name.

A benchmark is registered as an entry point of the group ``fairness_tests.benchmarks``
(as pytest finds its plugins in ``pytest11``): the name is the entry point's, the value
``"module:Class"`` names its :class:`~fairness_tests.pipeline.protocols.base.Benchmark`.
The built-in ones are registered the same way, in this package's ``pyproject.toml``; a
benchmark of another distribution is found once that distribution is installed, with no
line of this package changed. Benchmarks that share their data, records and tables
belong to one :class:`~fairness_tests.pipeline.protocols.base.Family` (BBQ and
consistency share the BBQ items and the one BBQ table builder). The audit, the dry
run, the configuration's defaults, the card, compare, the gate, the plugin's markers and
the suite's drift tables iterate the registry (:func:`benchmarks`, :func:`families`) and
read what each benchmark declares about itself.

The entries are read from the installed distributions' metadata (no import). A
benchmark's class is imported when its declarations are read: its module must be light
(no pandas, as the built-in ones: their computing lives in the family's module, named by
``FamilySpec.impl`` and imported when a run uses it), so that the configuration and the
pytest plugin read them without importing pandas.
"""
from __future__ import annotations

import importlib
from importlib.metadata import distributions
from typing import TYPE_CHECKING, Any

from fairness_tests.core.errors import ConfigError

if TYPE_CHECKING:
    from fairness_tests.pipeline.protocols.base import Benchmark, FamilySpec

#: the entry-point group a benchmark registers in
GROUP = "fairness_tests.benchmarks"
#: the built-in benchmarks, first in this order; other distributions' follow by name
BUILTIN = ("bbq", "consistency", "generative", "probe")


def _registered() -> dict[str, str]:
    """``{name: "module:Class"}`` of every installed benchmark: the built-in ones in
    :data:`BUILTIN` order, then the others sorted by name. Two distributions registering
    one name is a :class:`ConfigError` naming both."""
    found: dict[str, str] = {}
    # every distribution's entries, not entry_points()'s first distribution of a name: a
    # source checkout's stale ``*.egg-info`` would otherwise hide the installed metadata
    eps = {(ep.name, ep.value) for d in distributions() for ep in d.entry_points
           if ep.group == GROUP}
    for ep in sorted(eps):
        name, value = ep
        if name in found:
            raise ConfigError(f"benchmark {name!r} is registered twice (entry points "
                              f"{found[name]} and {value} of group {GROUP})")
        found[name] = value
    missing = [n for n in BUILTIN if n not in found]
    if missing:
        raise ConfigError(f"the built-in benchmarks {', '.join(missing)} are not registered: "
                          "the fairness-tests distribution is not installed (pip install -e .)")
    order = list(BUILTIN) + sorted(n for n in found if n not in BUILTIN)
    return {n: found[n] for n in order}


REGISTRY: dict[str, str] = _registered()
PROTOCOL_NAMES: tuple[str, ...] = tuple(REGISTRY)


def load(target: str) -> Any:
    """The object ``"module:attr"`` names (its module imported on first use)."""
    module, attr = target.split(":")
    return getattr(importlib.import_module(module), attr)


def protocol(name: str) -> type[Benchmark]:
    """The registered benchmark class of ``name`` (imported on first use)."""
    cls: type[Benchmark] = load(REGISTRY[name])
    return cls


def benchmarks() -> tuple[type[Benchmark], ...]:
    """Every registered benchmark class, in registry order."""
    return tuple(protocol(name) for name in REGISTRY)


def families() -> tuple[FamilySpec, ...]:
    """Every registered benchmark family, in the order its first benchmark is registered."""
    return tuple(dict.fromkeys(b.family for b in benchmarks()))


def family_tables(family: FamilySpec) -> tuple[str, ...]:
    """The tables that show a family ran: its benchmarks' ``tables``, in registry order."""
    return tuple(dict.fromkeys(t for b in benchmarks() if b.family == family for t in b.tables))
