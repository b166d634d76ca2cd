"""The one validator for every input file: JSON Schema + line numbers.

Thresholds, rubrics, the generative suite, the counterfactual probe, the recordings
manifest, the user card YAML and the ``[tool.fairness_tests]`` table are each
described by a JSON Schema (``fairness_tests/data/schemas/<name>.yaml``, or built
from data as for the user card fields) and checked with :mod:`jsonschema`. What a
schema cannot say (a metric must exist in its table, a regex must compile) is a
*check*: a function ``(data, lines) -> [Problem]`` run after the schema on the
same file. Every problem of a file is reported at once, each with file, line and
key path (``rules[2].bound``), as one :class:`~fairness_tests.core.errors.ConfigError`
whose ``problems`` lists them.

Messages are rewritten to say what to do: ``unknown key 'rationle' (did you mean
'rationale'?)``, ``must be a number, got str '0.1'``, ``missing required key 'bound'``.
A subschema may carry ``x-message`` to replace the message of any error it raises
(except unknown keys), and ``x-unknown`` to explain what an unknown key should be.
"""
from __future__ import annotations

import json
import math
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import yaml

from fairness_tests.core.errors import ConfigError, Problem, suggest
from fairness_tests.core.paths import data_path
from fairness_tests.core.text import decode_input

SCHEMA_DIR = data_path("schemas")


#: the message of a required key that is absent (a card declares some absent on purpose)
MISSING_REQUIRED = "missing required key"


Check = Callable[[Any, dict[str, int]], Iterable[Problem]]


# --------------------------------------------------------------------------- key paths, lines

def key_path(parts: Iterable[Any]) -> str:
    """``["decoding", "regimes", 0, "temperature"]`` -> ``decoding.regimes[0].temperature``."""
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            out += ("." if out else "") + str(p)
    return out or "(top level)"


#: libyaml's loader where PyYAML was built with it (10x faster; the same documents,
#: the same marks), else PyYAML's own
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(text: str) -> Any:
    """``yaml.safe_load(text)`` with :data:`_LOADER`."""
    return yaml.load(text, Loader=_LOADER)  # noqa: S506  a safe loader


def line_index(text: str) -> dict[str, int]:
    """Key path -> 1-based line of that key (or list item) in a YAML or JSON text."""
    try:
        root = yaml.compose(text, Loader=_LOADER)
    except yaml.YAMLError:
        return {}
    out: dict[str, int] = {}
    if root is not None:
        out["(top level)"] = root.start_mark.line + 1

    def walk(node: yaml.Node, parts: list[Any]) -> None:
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                p = parts + [k.value]
                out.setdefault(key_path(p), k.start_mark.line + 1)
                walk(v, p)
        elif isinstance(node, yaml.SequenceNode):
            for i, v in enumerate(node.value):
                p = parts + [i]
                out[key_path(p)] = v.start_mark.line + 1
                walk(v, p)

    if root is not None:
        walk(root, [])
    return out


def nearest_line(path: str, lines: dict[str, int] | None) -> int | None:
    """The line of ``path``, else of its closest enclosing key."""
    if not lines:
        return None
    p = path
    while p:
        if p in lines:
            return lines[p]
        cut = max(p.rfind("."), p.rfind("["))
        if cut <= 0:
            break
        p = p[:cut]
    return lines.get(p, lines.get("(top level)"))


def _duplicate_keys(text: str) -> list[Problem]:
    """Keys given twice in one mapping (YAML keeps the last one silently)."""
    try:
        root = yaml.compose(text, Loader=_LOADER)
    except yaml.YAMLError:
        return []
    out: list[Problem] = []

    def walk(node: yaml.Node, parts: list[Any]) -> None:
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for k, v in node.value:
                p = parts + [k.value]
                if k.value in seen:
                    out.append(Problem(key_path(p), "duplicate key", k.start_mark.line + 1))
                seen.add(k.value)
                walk(v, p)
        elif isinstance(node, yaml.SequenceNode):
            for i, v in enumerate(node.value):
                walk(v, parts + [i])

    if root is not None:
        walk(root, [])
    return out


# --------------------------------------------------------------------------- reading

def read_text(path: str | Path, what: str = "file") -> str:
    """The text of an input file, decoded by :func:`fairness_tests.core.text.decode_input`
    (UTF-8; anything else is a ConfigError naming the file)."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {what}: {exc.strerror or exc}", path=p) from None
    return decode_input(raw, p, ConfigError)


def parse(text: str, path: str | Path) -> Any:
    """YAML (or JSON, by suffix); a syntax error or a key given twice in one mapping
    is a ConfigError naming file and line."""
    p = Path(path)
    dup = _duplicate_keys(text)
    if dup:
        raise error(dup, p)
    if p.suffix.lower() == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"not valid JSON ({exc.msg})", path=p, line=exc.lineno) from None
    try:
        return load_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"not valid YAML: {problem}", path=p,
                          line=None if mark is None else mark.line + 1) from None


# --------------------------------------------------------------------------- schemas

@lru_cache(maxsize=None)
def load_schema(name: str) -> dict:
    """``fairness_tests/data/schemas/<name>.yaml``."""
    return load_yaml((SCHEMA_DIR / f"{name}.yaml").read_text(encoding="utf-8"))


_TYPE_WORDS = {"number": "a number", "integer": "an integer", "string": "a string",
               "boolean": "true or false", "array": "a list", "object": "a mapping",
               "null": "null"}


def _got(instance: Any) -> str:
    kind = {dict: "mapping", list: "list", bool: "boolean", type(None): "null"}.get(
        type(instance), type(instance).__name__)
    shown = repr(instance)
    return f"got {kind} {shown[:60]}" if kind not in ("mapping", "list") else f"got a {kind}"


def _messages(err: Any) -> list[tuple[list[Any], str]]:    # a jsonschema ValidationError
    """(key path parts, message) for one jsonschema error."""
    parts = list(err.absolute_path)
    custom = err.schema.get("x-message") if isinstance(err.schema, dict) else None
    v, inst, val = err.validator, err.instance, err.validator_value
    if v == "additionalProperties" and isinstance(inst, dict):
        allowed = list((err.schema.get("properties") or {}).keys())
        patterns = list((err.schema.get("patternProperties") or {}).keys())
        extra = [k for k in inst if k not in allowed
                 and not any(re.search(p, str(k)) for p in patterns)]
        tail = f"; allowed: {', '.join(allowed)}" if allowed else ""
        unknown = err.schema.get("x-unknown")
        return [(parts + [k], f"unknown key {k!r}{suggest(k, allowed)}"
                 + (f"; {unknown}" if unknown else tail)) for k in extra]
    if v == "required":
        missing = [k for k in val if isinstance(inst, dict) and k not in inst]
        return [(parts + [k], custom or MISSING_REQUIRED) for k in missing]
    if custom:
        return [(parts, custom)]
    if v == "type":
        types = [val] if isinstance(val, str) else list(val)
        words = " or ".join(_TYPE_WORDS.get(t, t) for t in types)
        return [(parts, f"must be {words}, {_got(inst)}")]
    if v == "enum":
        opts = ", ".join(repr(o) for o in val)
        return [(parts, f"must be one of {opts}, got {inst!r}{suggest(inst, val)}")]
    if v == "const":
        return [(parts, f"must be {val!r}, got {inst!r}")]
    if v in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        op = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">",
              "exclusiveMaximum": "<"}[v]
        return [(parts, f"must be {op} {val}, got {inst!r}")]
    if v in ("minItems", "minProperties"):
        return [(parts, "must not be empty" if val == 1 else f"needs at least {val} entries")]
    if v == "minLength":
        return [(parts, "must be a non-empty string")]
    if v == "uniqueItems":
        return [(parts, "has duplicate entries")]
    if v == "pattern":
        return [(parts, f"{inst!r} does not match the pattern {val}")]
    if v in ("oneOf", "anyOf"):
        return [(parts, err.schema.get("description") or "matches none of the allowed forms")]
    return [(parts, err.message)]


def schema_problems(data: Any, schema: dict | str, lines: dict[str, int] | None = None,
                    tag: str | None = None) -> list[Problem]:
    """Every problem jsonschema (draft 2020-12, ``format`` checked) finds in ``data``
    (named schema or a schema dict); ``tag``: the schema's name each problem carries
    (:attr:`Problem.schema`), for an input several schemas judge."""
    # jsonschema takes 60 ms to import: only when a file is checked (never at plugin load)
    from jsonschema import Draft202012Validator  # noqa: PLC0415  import cost at plugin load

    if isinstance(schema, str):
        schema = load_schema(schema)
    validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    out = []
    seen = set()
    for err in validator.iter_errors(data):
        for parts, msg in _messages(err):
            key = key_path(parts)
            if (key, msg) in seen:
                continue
            seen.add((key, msg))
            out.append(Problem(key, msg, nearest_line(key, lines), tag))
    return out


# --------------------------------------------------------------------------- raising

def error(problems: Sequence[Problem], source: Any) -> ConfigError:
    """One ConfigError for all ``problems`` of ``source`` (sorted by line)."""
    problems = sorted(problems, key=lambda p: (p.line or 0, p.key))
    first = problems[0]
    if len(problems) == 1:
        exc = ConfigError(first.message, path=source, line=first.line, key=first.key)
    else:
        head = f"{len(problems)} problems"
        lines = [head] + [f"  {source}, {p}" if source else f"  {p}" for p in problems]
        exc = ConfigError("\n".join(lines), path=source)
        exc.line, exc.key = first.line, first.key
    exc.problems = tuple(problems)
    return exc


def non_finite_problems(data: Any, lines: dict[str, int] | None = None,
                        parts: tuple[Any, ...] = ()) -> list[Problem]:
    """Every number of an input that is not finite (YAML's ``.nan``, ``.inf``): no
    bound, margin, tolerance or setting is NaN or infinite, so each is a problem naming
    its key and line."""
    if isinstance(data, float) and not math.isfinite(data):
        key = key_path(parts)
        return [Problem(key, f"must be a finite number, got {data!r}",
                        nearest_line(key, lines))]
    items = data.items() if isinstance(data, dict) else \
        enumerate(data) if isinstance(data, list) else ()
    return [p for k, v in items for p in non_finite_problems(v, lines, (*parts, k))]


def check_data(data: Any, schema: dict | str, source: Any = None,
               lines: dict[str, int] | None = None, checks: Sequence[Check] = ()) -> Any:
    """Validate ``data``: schema first, then each check (each sees the whole data,
    so a check must tolerate values the schema rejects). Raises one ConfigError
    listing every problem; returns ``data`` when there is none."""
    lines = lines or {}
    finite = non_finite_problems(data, lines)
    named = {p.key for p in finite}
    problems = finite + [p for p in schema_problems(data, schema, lines) if p.key not in named]
    for check in checks:
        problems += list(check(data, lines))
    if problems:
        raise error(problems, source)
    return data


def load_file(path: str | Path, schema: dict | str, checks: Sequence[Check] = (),
              what: str = "file") -> tuple[Any, dict[str, int]]:
    """Read, parse and validate a YAML/JSON file; returns (data, line index)."""
    text = read_text(path, what)
    data = parse(text, path)
    lines = line_index(text)
    check_data(data, schema, source=path, lines=lines, checks=checks)
    return data, lines
