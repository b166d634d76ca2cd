"""Options declared once: each option is a dataclass field whose metadata says its help,
range, spelling and where it appears; everything else is generated from it.

A configuration class (``AuditConfig``, ``BBQScoreConfig``, ...) is a frozen, keyword-only
dataclass whose fields are made by :func:`opt`. The field's type annotation is its type
(``int``, ``float``, ``str``, ``bool``, ``X | None``, ``tuple[X, ...]``; ``Literal[...]``
gives the choices); the metadata gives the rest. From that one declaration:

- :func:`add_arguments` makes the argparse options of a subcommand (``--n-boot``);
- :func:`add_pytest_options` makes the pytest options and ini keys (``--fairness-n-boot``,
  ``fairness_n_boot``);
- the ``[tool.fairness_tests]`` table of a project's ``pyproject.toml`` may set any option
  whose ``toml`` flag is on (``n_boot = 5000``);
- :func:`build` converts and validates values from any of these sources, lowest precedence
  first, and reports every problem at once in one line, each spelled the way its source
  spells it (``--n-boot``, ``--fairness-n-boot``, ``ini fairness_n_boot``,
  ``pyproject.toml [tool.fairness_tests] n_boot``, ``n_boot=``).

The Python API validates the same way: constructing a configuration runs the same checks
in ``__post_init__`` (:class:`Checked`).
"""
from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from fairness_tests.core.errors import ConfigError, Problem, suggest
from fairness_tests.core.outputs import PathArg

#: how a value's source spells an option: field name -> text naming it in a message
Spelling = Callable[[str], str]


#: what a command does with a path option: reads it (``input``, the role of every
#: ``path=True`` option that declares none), writes it (``output_dir``: a folder it creates,
#: replaces or fills; ``output_file``: a file), or both in place (``inout``: a response
#: store). No output may be, hold or sit inside another path of the same command
#: (:func:`fairness_tests.core.outputs.check_paths`): a new command gets the check from its
#: declaration.
PathRole = Literal["input", "output_dir", "output_file", "inout"]


@dataclass(frozen=True)
class Option:
    """What a field's metadata says about it (see :func:`opt`)."""
    help: str
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    flag: str | None = None          # CLI flag; default "--" + name with "-"
    aliases: tuple[str, ...] = ()    # further CLI flags
    negative: str | None = None      # bool: the flag that sets False (e.g. "replay")
    cli: bool = True                 # an option of the command line
    pytest: bool = True              # --fairness-<name> and ini fairness_<name>
    pytest_name: str | None = None   # the <name> in --fairness-<name>, when not the flag's
    toml: bool = True                # a key of [tool.fairness_tests]
    metavar: str | None = None
    positional: bool = False         # a positional argument of the command line
    none_word: str | None = None     # this word on a command line means None ("none")
    group: str | None = None         # argparse group title
    path: bool = False               # a path: shown as display_path wherever it is shown
    role: PathRole | None = None     # a path's part in its command (see PathRole)
    regen: bool = True               # part of the command line that regenerates a run
    per_model: bool = False          # pytest: repeatable, one run per value
    empty_ok: bool = False           # a list option that may be given empty
    choices: tuple[str, ...] = ()    # allowed values, when the type is no Literal

    def path_role(self) -> PathRole | None:
        """The declared role; ``input`` for a path that declares none."""
        return self.role or ("input" if self.path else None)

    def cli_flag(self, name: str) -> str:
        return self.flag or "--" + name.replace("_", "-")

    def pytest_flag(self, name: str) -> str:
        return "--fairness-" + (self.pytest_name or self.cli_flag(name)[2:])

    def ini_key(self, name: str) -> str:
        return "fairness_" + (self.pytest_name or self.cli_flag(name)[2:]).replace("-", "_")


def opt(default: Any, help: str, **meta: Any) -> Any:
    """A configuration field: ``default``, ``help`` and the :class:`Option` metadata."""
    return dataclasses.field(default=default, metadata={"option": Option(help=help, **meta)})


# ----------------------------------------------------------------------------- types

@dataclass(frozen=True)
class Kind:
    """A field's type, as conversion needs it."""
    base: type                        # int | float | str | bool
    optional: bool = False            # None allowed
    many: bool = False                # tuple[base, ...]
    choices: tuple[Any, ...] = ()     # Literal values (of base)
    words: tuple[str, ...] = ()       # literal words accepted beside a numeric base


def kind_of(hint: Any) -> Kind:
    """The :class:`Kind` of a resolved type annotation."""
    optional = False
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        optional = type(None) in args
        parts = [a for a in args if a is not type(None)]
    else:
        parts = [hint]
    many = False
    if len(parts) == 1 and typing.get_origin(parts[0]) is tuple:
        many, parts = True, [typing.get_args(parts[0])[0]]
    base: type | None = None
    choices: list[Any] = []
    words: list[str] = []
    for p in parts:
        if typing.get_origin(p) is Literal:
            choices.extend(typing.get_args(p))
        elif p in (int, float, str, bool):
            base = p
        else:
            raise TypeError(f"unsupported option type {p!r}")
    if base is None:
        base = type(choices[0])
    elif choices:                     # e.g. int | Literal["auto"]
        words, choices = [str(c) for c in choices], []
    return Kind(base, optional, many, tuple(choices), tuple(words))


_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def _scalar(value: Any, k: Kind, none_word: str | None) -> Any:
    """One value converted to ``k.base`` (strings from a command line or an ini file
    parsed); raises ValueError with the reason."""
    if isinstance(value, str) and none_word is not None and value == none_word:
        return None
    if isinstance(value, str) and value in k.words:
        return value
    if k.base is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in _TRUE | _FALSE:
            return value.lower() in _TRUE
        raise ValueError(f"must be true or false, got {value!r}")
    if k.base is int:
        if isinstance(value, bool) or not isinstance(value, (int, str, float)):
            raise ValueError(f"must be an integer, got {value!r}")
        try:
            number = int(value) if not isinstance(value, float) else value
        except ValueError:
            raise ValueError(f"must be an integer, got {value!r}") from None
        if isinstance(number, float) and not number.is_integer():
            raise ValueError(f"must be an integer, got {value!r}")
        return int(number)
    if k.base is float:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ValueError(f"must be a number, got {value!r}")
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"must be a number, got {value!r}") from None
        if not math.isfinite(number):
            raise ValueError(f"must be a finite number, got {value!r}")
        return number
    if not isinstance(value, str):
        raise ValueError(f"must be a string, got {value!r}")
    return value


def _in_range(v: Any, o: Option) -> str | None:
    """Why ``v`` is outside the option's range (None when inside)."""
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return None
    for bound, ok, word in ((o.ge, lambda b: v >= b, ">="), (o.gt, lambda b: v > b, ">"),
                            (o.le, lambda b: v <= b, "<="), (o.lt, lambda b: v < b, "<")):
        if bound is not None and not ok(bound):
            shown = int(bound) if float(bound).is_integer() else bound
            return f"must be {word} {shown}, got {v}"
    return None


def convert(value: Any, k: Kind, o: Option) -> Any:
    """``value`` converted to the field's type and checked against its choices and range;
    raises ValueError naming what is wrong."""
    if value is None:
        if k.optional:
            return None
        raise ValueError("must be given (None is not allowed)")
    if k.many:
        items = [value] if isinstance(value, (str, int, float)) else value
        if not isinstance(items, (list, tuple)):
            raise ValueError(f"must be a list, got {value!r}")
        if k.choices or o.choices:      # a list of fixed words: "a,b" is "a b" too
            items = [x for item in items
                     for x in (item.split(",") if isinstance(item, str) else (item,)) if x != ""]
        out = tuple(_one(x, k, o) for x in items)
        if not out and not o.empty_ok:
            raise ValueError("must not be empty")
        return out
    return _one(value, k, o)


def _one(value: Any, k: Kind, o: Option) -> Any:
    v = _scalar(value, k, o.none_word)
    if v is None:
        if not k.optional:
            raise ValueError(f"must be given ({o.none_word!r} is not allowed here)")
        return None
    choices = k.choices or o.choices
    if choices and v not in choices:
        allowed = ", ".join(str(c) for c in choices)
        raise ValueError(f"must be one of {allowed}, got {value!r}{suggest(v, choices)}")
    why = _in_range(v, o)
    if why:
        raise ValueError(why)
    return v


# ----------------------------------------------------------------------------- classes

@dataclass(frozen=True)
class FieldSpec:
    """One option of a configuration class: its name, type, default and metadata."""
    name: str
    kind: Kind
    option: Option
    default: Any


def specs(cls: type) -> dict[str, FieldSpec]:
    """The options of configuration class ``cls`` by field name (declaration order)."""
    cached = _SPECS.get(cls)
    if cached is None:
        hints = typing.get_type_hints(cls)
        fields = {f.name: f for f in dataclasses.fields(cls) if "option" in f.metadata}
        # the class's own options first, then each base's in method resolution order
        order = [n for c in cls.__mro__ for n in vars(c).get("__annotations__", {})
                 if n in fields]
        cached = {n: FieldSpec(n, kind_of(hints[n]), fields[n].metadata["option"],
                               fields[n].default) for n in dict.fromkeys(order)}
        _SPECS[cls] = cached
    return cached


_SPECS: dict[type, dict[str, FieldSpec]] = {}


def path_args(config: Any, spell: Spelling) -> list[PathArg]:
    """Every path a configuration names, with its option's role and spelling (a list
    option gives one entry per path; an option not set gives none)."""
    out = []
    for name, spec in specs(type(config)).items():
        role = spec.option.path_role()
        value = getattr(config, name)
        if role is None or value is None:
            continue
        for path in (value if isinstance(value, tuple) else (value,)):
            out.append(PathArg(spell(name), role, str(path)))
    return out


def python_spelling(name: str) -> str:
    return f"{name}="


class Checked:
    """Base of configuration classes: construction converts and checks every field (the
    Python API validates like every other entry point) and runs :meth:`cross_check`."""

    def __post_init__(self) -> None:
        problems = []
        for name, spec in specs(type(self)).items():
            try:
                object.__setattr__(self, name, convert(getattr(self, name), spec.kind,
                                                       spec.option))
            except ValueError as exc:
                problems.append((name, str(exc)))
        if not problems:
            problems = list(self.cross_check())
        if problems:
            raise OptionErrors(problems, python_spelling)

    def cross_check(self) -> Iterable[tuple[str, str]]:
        """(field, message) for each rule between fields that does not hold."""
        return ()

    def explicit(self) -> dict[str, Any]:
        """The fields that differ from their defaults (what a command line must say)."""
        return {n: getattr(self, n) for n, s in specs(type(self)).items()
                if getattr(self, n) != s.default}


class OptionErrors(ConfigError):
    """Every problem of one configuration, spelled for the entry point that built it."""

    def __init__(self, problems: Sequence[tuple[str, str]], spell: Spelling):
        self.problems_by_field = list(problems)
        self.spell = spell
        text = "; ".join(f"{spell(n)}: {m}" for n, m in problems)
        super().__init__(text)
        self.problems = tuple(Problem(spell(n), m) for n, m in problems)

    def respelled(self, spell: Spelling) -> "OptionErrors":
        return OptionErrors(self.problems_by_field, spell)


@dataclass(frozen=True)
class Layer:
    """Values from one source, and how that source spells an option."""
    values: Mapping[str, Any]
    spell: Spelling


def build(cls: type, layers: Sequence[Layer], *, extra: Mapping[str, Any] | None = None,
          unknown_ok: bool = False) -> Any:
    """An instance of configuration class ``cls`` from ``layers`` (lowest precedence
    first; a value of None in a layer means "not set there"); ``extra``: values the
    caller fixes (Python spelling). Every problem of every layer is reported at once
    (:class:`OptionErrors`), each in its own layer's spelling; unknown keys too (with a
    suggestion), unless ``unknown_ok``."""
    spec = specs(cls)
    chosen: dict[str, tuple[Any, Spelling]] = {}
    problems: list[tuple[str, str]] = []
    spellings: dict[str, Spelling] = {}
    for layer in layers:
        for name, value in layer.values.items():
            if name not in spec:
                if not unknown_ok:
                    key = f"\x00{len(problems)}"
                    spellings[key] = _fixed(layer.spell(name))
                    problems.append((key, f"unknown option{suggest(name, spec)}"))
                continue
            if value is None:
                continue
            try:
                chosen[name] = (convert(value, spec[name].kind, spec[name].option), layer.spell)
            except ValueError as exc:
                spellings[name] = layer.spell
                problems.append((name, str(exc)))
    if problems:
        raise OptionErrors(problems, lambda n: spellings[n](n) if n in spellings else n)
    kw = {n: v for n, (v, _) in chosen.items()}
    kw.update(extra or {})
    try:
        return cls(**kw)
    except OptionErrors as exc:      # a cross-field rule: name each field as it was given
        return _raise(exc, {n: s for n, (_, s) in chosen.items()})


def _fixed(text: str) -> Spelling:
    return lambda _name: text


def _raise(exc: OptionErrors, given: Mapping[str, Spelling]) -> Any:
    raise exc.respelled(lambda n: given[n](n) if n in given else python_spelling(n)) from None
