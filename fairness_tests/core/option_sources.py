"""Where option values come from, generated from the configuration spec
(:mod:`fairness_tests.core.options`): the command line (argparse), the pytest options and
ini keys, and a project's ``[tool.fairness_tests]`` table. Each source gives a
:class:`~fairness_tests.core.options.Layer` of raw values with its own spelling of an
option's name; :func:`~fairness_tests.core.options.build` converts and checks them."""
from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from fairness_tests.core.errors import suggest
from fairness_tests.core.options import (
    FieldSpec,
    Layer,
    OptionErrors,
    Spelling,
    build,
    specs,
)

# ----------------------------------------------------------------------------- argparse

class _Store(argparse.Action):
    """Stores the raw string(s); conversion and checks happen once, in :func:`build`. A
    list option given twice extends its list (``--cluster a --cluster b``)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        if isinstance(values, list) and getattr(namespace, self.dest, None):
            values = [*getattr(namespace, self.dest), *values]
        setattr(namespace, self.dest, values)


def cli_flags(cls: type, name: str) -> tuple[str, ...]:
    """The command-line flags of field ``name`` in command ``cls`` (its ``CLI_FLAGS``
    entry when the command spells it otherwise, else the canonical flag and aliases)."""
    own = getattr(cls, "CLI_FLAGS", {}).get(name)
    if own:
        return tuple(own)
    o = specs(cls)[name].option
    return (o.cli_flag(name), *o.aliases)


def cli_spelling(cls: type) -> Spelling:
    spec = specs(cls)

    def spell(n: str) -> str:
        if n not in spec:
            return n
        return spec[n].option.metavar or n.upper() if spec[n].option.positional \
            else cli_flags(cls, n)[0]
    return spell


def add_arguments(parser: argparse.ArgumentParser, cls: type) -> None:
    """The command-line options of configuration class ``cls`` on ``parser``: every
    value is kept as given (strings) and None when absent, for :func:`from_namespace`."""
    groups: dict[str, Any] = {}
    for name, s in specs(cls).items():
        o = s.option
        if not o.cli:
            continue
        target: Any = parser
        if o.group:
            target = groups.get(o.group) or groups.setdefault(
                o.group, parser.add_argument_group(o.group))
        help_text = _help(s)
        if o.positional:
            target.add_argument(name, metavar=o.metavar or name.upper(), help=help_text,
                                nargs="+" if s.kind.many else None, action=_Store)
            continue
        flags = list(cli_flags(cls, name))
        if s.kind.base is bool and not s.kind.many:
            target.add_argument(*flags, dest=name, action="store_const", const=True,
                                default=None, help=help_text)
            if o.negative:
                target.add_argument(f"--{o.negative}", dest=name, action="store_const",
                                    const=False, default=None, help=f"the opposite of {flags[0]}")
            continue
        nargs = ("*" if o.empty_ok else "+") if s.kind.many else None
        target.add_argument(*flags, dest=name, default=None, action=_Store, help=help_text,
                            nargs=nargs, metavar=_metavar(s),
                            required=s.default is None and not s.kind.optional)


def _metavar(s: FieldSpec) -> str | None:
    if s.option.metavar:
        return s.option.metavar
    choices = s.kind.choices or s.option.choices
    if choices:
        return "{" + ",".join(str(c) for c in choices) + "}"
    return None


def _help(s: FieldSpec) -> str:
    """The option's help with its default and range, generated from the declaration."""
    o, parts = s.option, [s.option.help]
    tail = []
    if s.default not in (None, (), False) and "default" not in o.help:
        shown = " ".join(map(str, s.default)) if isinstance(s.default, tuple) else s.default
        tail.append(f"default {shown}")
    for bound, word in ((o.ge, ">="), (o.gt, ">"), (o.le, "<="), (o.lt, "<")):
        if bound is not None:
            tail.append(f"{word} {int(bound) if float(bound).is_integer() else bound}")
    if tail:
        parts.append(f"({'; '.join(tail)})")
    return " ".join(parts).replace("%", "%%")


def from_namespace(cls: type, args: argparse.Namespace,
                   lower: Sequence[Layer] = (), extra: Mapping[str, Any] | None = None) -> Any:
    """The configuration of a parsed command line over ``lower`` layers (e.g. a
    project's ``[tool.fairness_tests]`` values, a model's recording settings)."""
    values = {n: getattr(args, n) for n, s in specs(cls).items() if s.option.cli
              and hasattr(args, n)}
    return build(cls, [*lower, Layer(values, cli_spelling(cls))], extra=extra)


# ----------------------------------------------------------------------------- pytest

def pytest_spelling(cls: type) -> Spelling:
    spec = specs(cls)
    return lambda n: spec[n].option.pytest_flag(n) if n in spec else n


def ini_spelling(cls: type) -> Spelling:
    spec = specs(cls)
    return lambda n: f"ini {spec[n].option.ini_key(n)}" if n in spec else n


def pytest_fields(cls: type) -> dict[str, FieldSpec]:
    return {n: s for n, s in specs(cls).items() if s.option.pytest}


def add_pytest_options(parser: Any, group: Any, cls: type) -> None:
    """``--fairness-<name>`` options and ``fairness_<name>`` ini keys of ``cls``'s fields
    (``parser``: pytest's Parser; ``group``: its option group)."""
    for name, s in pytest_fields(cls).items():
        o = s.option
        flag = o.pytest_flag(name)
        dest = o.ini_key(name)
        multi = s.kind.many or o.per_model
        if s.kind.base is bool and not multi:
            group.addoption(flag, dest=dest, action="store_const", const=True, default=None,
                            help=_help(s))
            if o.negative:
                group.addoption(f"--fairness-{o.negative}", dest=dest, action="store_const",
                                const=False, default=None, help=f"the opposite of {flag}")
        else:
            group.addoption(flag, dest=dest, default=None,
                            action="append" if multi else "store", metavar=_metavar(s),
                            help=_help(s) + (" (repeatable)" if multi else ""))
        parser.addini(dest, f"{o.help} ({flag})", type="linelist" if multi else "string",
                      default=None)


def pytest_layers(cls: type, getoption: Callable[[str], Any],
                  getini: Callable[[str], Any]) -> list[Layer]:
    """The ini layer and the command-line layer of ``cls``'s pytest options (values as
    given; :func:`build` converts them)."""
    ini: dict[str, Any] = {}
    cli: dict[str, Any] = {}
    for name, s in pytest_fields(cls).items():
        dest = s.option.ini_key(name)
        raw = getini(dest)
        if raw not in (None, "", []):
            ini[name] = raw
        given = getoption(dest)
        if given is not None:
            cli[name] = given
    return [Layer(ini, ini_spelling(cls)), Layer(cli, pytest_spelling(cls))]


# ----------------------------------------------------------------------------- TOML

def toml_spelling(source: str) -> Spelling:
    return lambda n: f"{source} {n}"


def toml_layer(cls: type, table: Mapping[str, Any], source: str) -> Layer:
    """The ``[tool.fairness_tests]`` keys that are options of ``cls`` (keys that are
    options of other commands are theirs; :func:`check_toml_keys` refuses the rest)."""
    spec = specs(cls)
    return Layer({k: v for k, v in table.items() if k in spec and spec[k].option.toml},
                 toml_spelling(source))


def check_toml_keys(table: Mapping[str, Any], classes: Iterable[type],
                    locations: Iterable[str], source: str) -> None:
    """Every key of a ``[tool.fairness_tests]`` table is a location or an option of one
    of ``classes``; one error lists every other key."""
    known = set(locations)
    for cls in classes:
        known |= {n for n, s in specs(cls).items() if s.option.toml}
    bad = [(k, f"unknown key {k!r}{suggest(k, known)}") for k in table if k not in known]
    if bad:
        raise OptionErrors(bad, toml_spelling(source))
